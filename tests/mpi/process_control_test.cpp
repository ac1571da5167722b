// Process control at 1, 2 and 4 ranks: ordering guards, on_* helpers,
// split_between_processes, the rank-aware logger and barrier timeouts.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <thread>

#include "accelerate/error.hpp"
#include "accelerate/runtime/logging.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/process_control.hpp"
#include "accelerate/runtime/split_tensor.hpp"
#include "accelerate/runtime/state.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace fs = std::filesystem;

// A file all ranks append lines to; created by rank 0, removed at the end.
class SharedLog {
 public:
  explicit SharedLog(const accelerate::State& state, const std::string& name) : state_(state) {
    std::string dir;
    if (state.is_main_process()) dir = fs::temp_directory_path() / ("accel-pc-" + std::to_string(::getpid()));
    int length = static_cast<int>(dir.size());
    MPI_Bcast(&length, 1, MPI_INT, 0, state.world_comm());
    dir.resize(static_cast<std::size_t>(length));
    MPI_Bcast(dir.data(), length, MPI_CHAR, 0, state.world_comm());
    if (state.is_main_process()) fs::create_directories(dir);
    path_ = dir + "/" + name;
    state.wait_for_everyone();
  }
  ~SharedLog() {
    state_.wait_for_everyone();
    if (state_.is_main_process()) fs::remove_all(fs::path(path_).parent_path());
  }
  void append(const std::string& line) const {
    std::ofstream out(path_, std::ios::app);
    out << line << '\n';
  }
  [[nodiscard]] std::vector<std::string> lines() const {
    std::ifstream in(path_);
    std::vector<std::string> result;
    for (std::string line; std::getline(in, line);) result.push_back(line);
    return result;
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  const accelerate::State& state_;
  std::string path_;
};

TEST(MainProcessFirst, MainFinishesBeforeOthersStart) {
  const accelerate::State state;
  const SharedLog log(state, "order.txt");
  {
    auto first = accelerate::main_process_first(state);
    // Give the others every chance to overtake the main process if the guard were broken.
    if (state.is_main_process()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    log.append("enter " + std::to_string(state.process_index()));
    log.append("leave " + std::to_string(state.process_index()));
  }
  state.wait_for_everyone();
  const auto lines = log.lines();
  ASSERT_EQ(static_cast<int>(lines.size()), 2 * state.num_processes());
  EXPECT_EQ(lines[0], "enter 0");
  EXPECT_EQ(lines[1], "leave 0");
}

TEST(MainProcessFirst, LocalGuardOrdersEachNodeIndependently) {
  accelerate::StateOptions options;
  options.emulated_ranks_per_node = 2;
  const accelerate::State state(options);
  const SharedLog log(state, "local.txt");
  {
    auto first = accelerate::local_main_process_first(state);
    if (state.is_local_main_process()) std::this_thread::sleep_for(std::chrono::milliseconds(150));
    log.append(std::to_string(state.node_index()) + " " + std::to_string(state.local_process_index()));
  }
  state.wait_for_everyone();
  // Within each node, the local main's line comes before its peers' lines.
  const auto lines = log.lines();
  ASSERT_EQ(static_cast<int>(lines.size()), state.num_processes());
  std::map<std::string, bool> main_seen;
  for (const auto& line : lines) {
    std::istringstream in(line);
    std::string node;
    int local = 0;
    in >> node >> local;
    if (local == 0) {
      main_seen[node] = true;
    } else {
      EXPECT_TRUE(main_seen[node]) << "local rank " << local << " of node " << node << " ran before its main";
    }
  }
}

TEST(MainProcessFirst, MainFailureStillReleasesTheOthers) {
  const accelerate::State state;
  bool thrown = false;
  try {
    auto first = accelerate::main_process_first(state);
    if (state.is_main_process()) throw std::runtime_error("download failed");
  } catch (const std::runtime_error&) {
    thrown = true;
  }
  EXPECT_EQ(thrown, state.is_main_process());
  state.wait_for_everyone();  // everyone got here: nobody hangs in the guard
}

TEST(OnProcess, RunsOnTheChosenRanksOnly) {
  const accelerate::State state;
  int calls = 0;
  EXPECT_EQ(accelerate::on_main_process(state, [&] { ++calls; }), state.is_main_process());
  EXPECT_EQ(accelerate::on_local_main_process(state, [&] { ++calls; }), state.is_local_main_process());
  EXPECT_EQ(accelerate::on_last_process(state, [&] { ++calls; }), state.is_last_process());
  const int target = state.num_processes() - 1;
  EXPECT_EQ(accelerate::on_process(state, target, [&] { ++calls; }), state.process_index() == target);
  EXPECT_EQ(accelerate::on_local_process(state, 0, [&] { ++calls; }), state.local_process_index() == 0);
  int total = 0;
  MPI_Allreduce(&calls, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  // main + local main (one node) + last + target(last) + local 0
  EXPECT_EQ(total, 5);
}

TEST(OnProcess, OutOfRangeIndexIsAnError) {
  const accelerate::State state;
  try {
    accelerate::on_process(state, state.num_processes(), [] {});
    FAIL() << "expected ConfigError";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("valid indices are 0.." + std::to_string(state.num_processes() - 1)),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(accelerate::on_local_process(state, -1, [] {}), accelerate::ConfigError);
}

TEST(SplitBetweenProcesses, SliceArithmeticMatchesAccelerate) {
  // 10 items over 4 processes: 3, 3, 2, 2.
  using accelerate::slice_for_process;
  const std::vector<std::pair<std::size_t, std::size_t>> expected{{0, 3}, {3, 6}, {6, 8}, {8, 10}};
  for (int i = 0; i < 4; ++i) {
    const auto slice = slice_for_process(10, 4, i);
    EXPECT_EQ(slice.begin, expected[static_cast<std::size_t>(i)].first);
    EXPECT_EQ(slice.end, expected[static_cast<std::size_t>(i)].second);
    EXPECT_EQ(slice.padded_size, 3U);
  }
  EXPECT_EQ(slice_for_process(3, 4, 3).begin, slice_for_process(3, 4, 3).end);  // empty slice
  EXPECT_EQ(slice_for_process(8, 4, 1).padded_size, 2U);                        // even: no padding
}

TEST(SplitBetweenProcesses, VectorsCoverEverythingOnce) {
  const accelerate::State state;
  std::vector<int> inputs(7);
  std::iota(inputs.begin(), inputs.end(), 100);
  const auto mine = accelerate::split_between_processes(state, inputs);
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(state.num_processes()));
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> displs(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
  std::vector<int> all(7);
  MPI_Allgatherv(mine.data(), count, MPI_INT, all.data(), counts.data(), displs.data(), MPI_INT, MPI_COMM_WORLD);
  EXPECT_EQ(all, inputs);
}

TEST(SplitBetweenProcesses, PaddingRepeatsTheLastItem) {
  const accelerate::State state;
  const std::vector<std::string> inputs{"a", "b", "c", "d", "e"};
  const auto mine = accelerate::split_between_processes(state, inputs, /*apply_padding=*/true);
  const auto slice = accelerate::slice_for_process(inputs.size(), state.num_processes(), state.process_index());
  ASSERT_EQ(mine.size(), slice.padded_size);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const std::size_t source = std::min(slice.begin + i, slice.end > slice.begin ? slice.end - 1 : inputs.size() - 1);
    EXPECT_EQ(mine[i], inputs[slice.end > slice.begin ? source : inputs.size() - 1]);
  }
}

TEST(SplitBetweenProcesses, TensorsSplitAlongTheFirstDimension) {
  const accelerate::State state;
  const auto inputs = torch::arange(10).reshape({5, 2});
  const auto mine = accelerate::split_between_processes(state, inputs);
  const auto slice = accelerate::slice_for_process(5, state.num_processes(), state.process_index());
  ASSERT_EQ(mine.size(0), static_cast<int64_t>(slice.end - slice.begin));
  if (mine.numel() > 0) {
    EXPECT_TRUE(
        torch::equal(mine, inputs.slice(0, static_cast<int64_t>(slice.begin), static_cast<int64_t>(slice.end))));
    EXPECT_EQ(mine.data_ptr(), inputs[static_cast<int64_t>(slice.begin)].data_ptr());  // a view, not a copy
  }
  const auto padded = accelerate::split_between_processes(state, inputs, true);
  ASSERT_EQ(padded.size(0), static_cast<int64_t>(slice.padded_size));
  ASSERT_EQ(padded.size(1), 2);
  const int64_t last = slice.end > slice.begin ? static_cast<int64_t>(slice.end) - 1 : 4;
  EXPECT_TRUE(torch::equal(padded[padded.size(0) - 1], inputs[last]));
  EXPECT_THROW(accelerate::split_between_processes(state, torch::tensor(3)), accelerate::ConfigError);
}

TEST(SplitBetweenProcesses, ShortInputsGiveProcessesPastTheEndTheLastItem) {
  // Accelerate's output for fewer items than processes: process i < length
  // gets item i, every later process the last item, padded or not.
  const accelerate::State state;
  const int n = state.num_processes();
  const int rank = state.process_index();
  std::vector<int> inputs(static_cast<std::size_t>(std::max(n - 1, 1)));
  std::iota(inputs.begin(), inputs.end(), 10);
  const int expected = rank < static_cast<int>(inputs.size()) ? 10 + rank : inputs.back();
  for (const bool padding : {false, true}) {
    EXPECT_EQ(accelerate::split_between_processes(state, inputs, padding), std::vector<int>{expected});
    const auto rows = accelerate::split_between_processes(
        state, torch::tensor(std::vector<int64_t>(inputs.begin(), inputs.end())).unsqueeze(1), padding);
    ASSERT_EQ(rows.size(0), 1);
    EXPECT_EQ(rows[0][0].item<int64_t>(), expected);
  }
  EXPECT_TRUE(accelerate::split_between_processes(state, std::vector<int>{}, true).empty());
  EXPECT_EQ(accelerate::split_between_processes(state, torch::zeros({0, 3})).size(0), 0);
}

TEST(SplitBetweenProcesses, MapsSplitEveryValueAlike) {
  const accelerate::State state;
  std::vector<int> a(7);
  std::iota(a.begin(), a.end(), 0);
  std::vector<int> b(7);
  std::iota(b.begin(), b.end(), 100);
  for (const bool padding : {false, true}) {
    const auto mine =
        accelerate::split_between_processes(state, std::map<std::string, std::vector<int>>{{"a", a}, {"b", b}},
                                            padding);
    ASSERT_EQ(mine.size(), 2U);
    EXPECT_EQ(mine.at("a"), accelerate::split_between_processes(state, a, padding));
    EXPECT_EQ(mine.at("b"), accelerate::split_between_processes(state, b, padding));
    const auto tensors = accelerate::split_between_processes(
        state,
        std::map<std::string, torch::Tensor>{{"x", torch::arange(7)}, {"y", torch::arange(7).reshape({7, 1}) + 100}},
        padding);
    ASSERT_EQ(tensors.at("x").size(0), static_cast<int64_t>(mine.at("a").size()));
    for (std::size_t i = 0; i < mine.at("a").size(); ++i) {
      EXPECT_EQ(tensors.at("x")[static_cast<int64_t>(i)].item<int64_t>(), mine.at("a")[i]);
      EXPECT_EQ(tensors.at("y")[static_cast<int64_t>(i)][0].item<int64_t>(), mine.at("b")[i]);
    }
  }
  try {
    (void)accelerate::split_between_processes(
        state, std::map<std::string, std::vector<int>>{{"a", a}, {"short", std::vector<int>{1, 2}}});
    ADD_FAILURE() << "values of different lengths were split";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("'a' has 7 items and 'short' has 2"), std::string::npos) << error.what();
  }
  EXPECT_THROW((void)accelerate::split_between_processes(state,
                                                         std::map<std::string, torch::Tensor>{{"x", torch::arange(3)},
                                                                                              {"y", torch::arange(4)}}),
               accelerate::ConfigError);
}

TEST(Logger, MainProcessOnlyByDefault) {
  const accelerate::State state;
  std::ostringstream sink;
  accelerate::Logger log(state, "test", &sink);
  log.info("hello");
  log.debug("filtered");
  if (state.is_main_process()) {
    EXPECT_EQ(sink.str(), "[rank 0] INFO test: hello\n");
  } else {
    EXPECT_EQ(sink.str(), "");
  }
  std::ostringstream all;
  accelerate::Logger everyone(state, "test", &all);
  everyone.warning("from all", {.main_process_only = false});
  EXPECT_EQ(all.str(), "[rank " + std::to_string(state.process_index()) + "] WARNING test: from all\n");
}

TEST(Logger, FormatsItsArgumentsAndTakesTextWithoutThemAsItIs) {
  const accelerate::State state;
  std::ostringstream sink;
  accelerate::Logger log(state, "fmt", &sink);
  log.info("step {} loss {:.3f}", 12, 0.25);
  log.warning("literal {braces} kept");
  log.debug("filtered {}", 1);
  if (state.is_main_process()) {
    EXPECT_EQ(sink.str(), "[rank 0] INFO fmt: step 12 loss 0.250\n[rank 0] WARNING fmt: literal {braces} kept\n");
  } else {
    EXPECT_EQ(sink.str(), "");
  }
}

TEST(Logger, InOrderWritesRankByRank) {
  const accelerate::State state;
  const SharedLog file(state, "in_order.txt");
  {
    std::ofstream out(file.path(), std::ios::app);
    accelerate::Logger log(state, "ordered", &out);
    // Later ranks would win the race without the ordering: make rank 0 slow.
    if (state.is_main_process()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log.info("line", {.main_process_only = false, .in_order = true});
  }
  state.wait_for_everyone();
  const auto lines = file.lines();
  ASSERT_EQ(static_cast<int>(lines.size()), state.num_processes());
  for (int r = 0; r < state.num_processes(); ++r) {
    EXPECT_EQ(lines[static_cast<std::size_t>(r)], "[rank " + std::to_string(r) + "] INFO ordered: line");
  }
}

TEST(Barrier, MissingRankBecomesATimeoutNotAHang) {
  if (accelerate::State(accelerate::StateOptions{}).num_processes() < 2) GTEST_SKIP() << "needs 2 ranks";
  accelerate::StateOptions options;
  options.timeout = std::chrono::seconds(1);
  const accelerate::State state(options);
  if (!state.is_main_process()) {
    // Rank 0 is late on purpose: the others must give up after the timeout.
    const auto start = std::chrono::steady_clock::now();
    try {
      state.wait_for_everyone();
      ADD_FAILURE() << "barrier completed without rank 0";
    } catch (const accelerate::TimeoutError& error) {
      EXPECT_NE(std::string(error.what()).find("wait_for_everyone"), std::string::npos) << error.what();
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
  }
  MPI_Barrier(MPI_COMM_WORLD);                             // everyone has timed out
  if (state.is_main_process()) state.wait_for_everyone();  // completes the others' pending barrier
  MPI_Barrier(MPI_COMM_WORLD);  // MPI progress in here lets the others' abandoned barrier finish
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
