// Accelerator::profile() at 1, 2 and 4 ranks: LibTorch's profiler writes one
// Chrome trace per rank, and the library's own work (collectives, gradient
// buckets, data-loader waits, checkpoint phases) appears in it as named
// ranges; the schedule records the steps it names, once per cycle.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/training/accelerator.hpp"
#include "common/gpu_skip.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
namespace fs = std::filesystem;
using acc::testing::world_rank;
using acc::testing::world_size;

class Profiling : public ::testing::Test {
 protected:
  void SetUp() override {
    if (acc::testing::ranks_share_a_gpu()) GTEST_SKIP() << acc::testing::kRanksShareAGpu;
  }
};

class Points : public torch::data::datasets::Dataset<Points> {
 public:
  torch::data::Example<> get(size_t i) override {
    const auto x = static_cast<float>(i % 7);
    return {torch::full({4}, x), torch::full({1}, 2 * x)};
  }
  torch::optional<size_t> size() const override { return 160; }
};

struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(4, 1)); }
  torch::Tensor forward(const torch::Tensor& x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

// How many times each event name occurs in a Chrome trace.
std::map<std::string, int> event_counts(const fs::path& file) {
  std::ifstream in(file);
  const auto trace = nlohmann::json::parse(in);
  std::map<std::string, int> counts;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.contains("name") && event["name"].is_string()) counts[event["name"].get<std::string>()] += 1;
  }
  return counts;
}

// A model and its optimizer, which must outlive the Accelerator's use of them.
struct Trainee {
  Trainee() : sgd(net->parameters(), 0.01) {}
  Net net;
  torch::optim::SGD sgd;
};

// A few prepared training steps, profiler.step() after each.
void train(acc::Accelerator& accelerator, acc::Profiler& profiler, int steps, Trainee& trainee) {
  auto [model, optimizer] = accelerator.prepare(trainee.net, trainee.sgd);
  auto loader = accelerator.prepare(acc::data_loader(Points(), {.batch_size = 2}));
  int step = 0;
  for (const auto& batch : *loader) {
    if (step++ == steps) break;
    const auto x = batch.data.to(accelerator.device());
    const auto loss = torch::mse_loss(model->forward<NetImpl>(x), batch.target.to(x.device()));
    accelerator.backward(loss);
    optimizer->step();
    optimizer->zero_grad();
    profiler.step();
  }
}

TEST_F(Profiling, EachRankWritesATraceWithTheLibrarysRanges) {
  const fs::path dir = acc::testing::shared_temp_directory("profiler_trace");
  Trainee trainee;  // outlives the Accelerator that prepared it
  acc::Accelerator accelerator(
      {.profile_kwargs = {.record_shapes = true, .output_trace_dir = (dir / "traces").string()}});
  {
    auto profiler = accelerator.profile();
    train(accelerator, profiler, 4, trainee);
    auto summed = torch::ones({3}).to(accelerator.device());
    accelerator.process_group().all_reduce(summed);
    if (acc::config::has_hdf5) (void)accelerator.save_state(dir / "checkpoint");
    profiler.stop();
    ASSERT_EQ(profiler.trace_files().size(), 1U);
    EXPECT_EQ(profiler.trace_files().front(), dir / "traces" / ("trace_rank" + std::to_string(world_rank()) + ".json"));
  }
  const auto counts = event_counts(dir / "traces" / ("trace_rank" + std::to_string(world_rank()) + ".json"));
  EXPECT_EQ(counts.count("accelerate::data_loader_next"), 1U);
  EXPECT_GE(counts.at("accelerate::data_loader_next"), 4);
  EXPECT_EQ(counts.count("accelerate::synchronize_gradients"), 1U);
  EXPECT_EQ(counts.count("accelerate::all_reduce"), 1U);
  // One rank's gradients need no all-reduce (the reducer skips it).
  EXPECT_EQ(counts.count("accelerate::bucket_all_reduce"), world_size() > 1 ? 1U : 0U);
  if (acc::config::has_hdf5) EXPECT_EQ(counts.count("accelerate::save_state"), 1U);
  for (int step = 0; step < 4; ++step) EXPECT_EQ(counts.count("ProfilerStep#" + std::to_string(step)), 1U) << step;
  // LibTorch's own operators are there too.
  EXPECT_TRUE(counts.count("aten::mse_loss") == 1U || counts.count("aten::addmm") == 1U);
  acc::testing::remove_shared_directory(dir);
}

TEST_F(Profiling, TheScheduleRecordsItsActiveStepsOncePerCycle) {
  const fs::path dir = acc::testing::shared_temp_directory("profiler_schedule");
  Trainee trainee;
  acc::Accelerator accelerator;
  std::vector<int> cycles;
  acc::ProfileKwargs kwargs{.schedule_option = acc::ProfileSchedule{.wait = 1, .warmup = 1, .active = 2, .repeat = 2},
                            .on_trace_ready = [&](const acc::ProfileTrace& trace) { cycles.push_back(trace.cycle()); },
                            .output_trace_dir = dir.string()};
  {
    auto profiler = accelerator.profile(kwargs);
    train(accelerator, profiler, 10, trainee);
    EXPECT_EQ(profiler.step_number(), 10);
  }
  EXPECT_EQ(cycles, (std::vector<int>{0, 1}));
  const std::string rank = std::to_string(world_rank());
  // Steps 0 wait, 1 warm-up, 2-3 recorded; 4 wait, 5 warm-up, 6-7 recorded; then no more cycles.
  const auto first = event_counts(dir / ("trace_rank" + rank + ".json"));
  const auto second = event_counts(dir / ("trace_rank" + rank + ".1.json"));
  for (int step = 0; step < 10; ++step) {
    const std::string name = "ProfilerStep#" + std::to_string(step);
    EXPECT_EQ(first.count(name), (step == 2 || step == 3) ? 1U : 0U) << name;
    EXPECT_EQ(second.count(name), (step == 6 || step == 7) ? 1U : 0U) << name;
  }
  EXPECT_FALSE(fs::exists(dir / ("trace_rank" + rank + ".2.json")));
  acc::testing::remove_shared_directory(dir);
}

TEST_F(Profiling, BadOptionsAreErrorsOnEveryRank) {
  acc::Accelerator accelerator;
  const auto unknown = acc::testing::error_of<acc::ConfigError>([&] {
    auto profiler = accelerator.profile(acc::ProfileKwargs{.activities = {"cpu", "tpu"}});
  });
  EXPECT_NE(unknown.find("'tpu' is not an activity"), std::string::npos) << unknown;
  if (!accelerator.device().is_cuda()) {
    const auto cuda = acc::testing::error_of<acc::ConfigError>(
        [&] { auto profiler = accelerator.profile(acc::ProfileKwargs{.activities = {"cuda"}}); });
    EXPECT_NE(cuda.find("runs on the CPU"), std::string::npos) << cuda;
  }
  const auto schedule = acc::testing::error_of<acc::ConfigError>([&] {
    auto profiler = accelerator.profile(acc::ProfileKwargs{.schedule_option = acc::ProfileSchedule{.active = 0}});
  });
  EXPECT_NE(schedule.find("active must be at least 1"), std::string::npos) << schedule;
  // One profiler at a time; after it stops, the next may start.
  auto profiler = accelerator.profile();
  const auto second = acc::testing::error_of<acc::ConfigError>([&] { auto other = accelerator.profile(); });
  EXPECT_NE(second.find("another profiler is running"), std::string::npos) << second;
  profiler.stop();
  EXPECT_NO_THROW({ auto again = accelerator.profile(); });
  const auto stepped = acc::testing::error_of<acc::ConfigError>([&] { profiler.step(); });
  EXPECT_NE(stepped.find("was stopped"), std::string::npos) << stepped;
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
