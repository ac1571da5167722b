// Streams without dispatching (StreamDataLoaderShard) at 1, 2 and 4 ranks:
// every rank reads the whole stream and keeps its slice of each round, the
// last round completed from the first (IterableDatasetShard's rule, checked
// against an independent model); resume re-reads the consumed rounds; and
// prepare_data_loader picks the loader Accelerate would.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "../common/test_helpers.hpp"
#include "accelerate/data/prepare_data_loader.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::DataLoader;
using accelerate::State;
using accelerate::StreamDataLoaderShard;
using accelerate::testing::error_of;
using Batch = torch::data::Example<>;
using Indices = std::vector<std::int64_t>;

/// The samples 0 … n-1, two at a time.
class Stream : public torch::data::datasets::StreamDataset<Stream> {
 public:
  explicit Stream(std::int64_t n) : n_(n) {}
  std::vector<Batch> get_batch(std::size_t want) override {
    std::vector<Batch> out;
    for (std::size_t k = 0; k < std::min<std::size_t>(want, 2) && next_ < n_; ++k, ++next_) {
      out.push_back({torch::full({3}, static_cast<float>(next_)), torch::tensor(next_)});
    }
    return out;
  }
  void reset() { next_ = 0; }
  [[nodiscard]] torch::optional<std::size_t> size() const override { return torch::nullopt; }

 private:
  std::int64_t n_;
  std::int64_t next_ = 0;
};

class Table : public torch::data::datasets::Dataset<Table> {
 public:
  Batch get(std::size_t i) override { return {torch::zeros({1}), torch::tensor(static_cast<std::int64_t>(i))}; }
  [[nodiscard]] torch::optional<std::size_t> size() const override { return 10; }
};

/// IterableDatasetShard's rule over 0 … n-1: rank r's batches.
std::vector<Indices> expected(std::int64_t n, std::int64_t g, int p, int r, bool drop_last) {
  std::vector<Indices> out;
  const std::int64_t b = g / p;
  const std::int64_t cycle = std::min(g, n);
  for (std::int64_t first = 0; first < n; first += g) {
    const std::int64_t real = std::min(g, n - first);
    if (real < g && drop_last) break;
    Indices round;
    for (std::int64_t j = 0; j < g; ++j) round.push_back(j < real ? first + j : (j - real) % cycle);
    out.emplace_back(round.begin() + r * b, round.begin() + (r + 1) * b);
  }
  return out;
}

std::vector<Indices> run_pass(DataLoader& loader, std::vector<bool>* ends = nullptr) {
  std::vector<Indices> out;
  for (const Batch& batch : loader) {
    const torch::Tensor t = batch.target.contiguous();
    out.emplace_back(t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel());
    if (ends != nullptr) ends->push_back(loader.end_of_dataloader());
  }
  return out;
}

TEST(StreamDataLoaderShard, EachRankKeepsItsSliceOfEveryRound) {
  const State state;
  const int p = state.num_processes();
  const int r = state.process_index();
  struct Case {
    std::int64_t n, batch;
    bool split, drop_last;
  };
  for (const Case& c : std::vector<Case>{{10, 2, false, false}, {11, 4, false, false}, {11, 4, false, true},
                                         {3, 4, false, false},  {0, 1, false, false},  {17, 8, true, false}}) {
    if (c.split && c.batch % p != 0) continue;
    SCOPED_TRACE("n=" + std::to_string(c.n) + " batch=" + std::to_string(c.batch));
    StreamDataLoaderShard loader(Stream(c.n), state, {.batch_size = c.batch, .drop_last = c.drop_last},
                                 {.split_batches = c.split, .dispatch_batches = false});
    const std::int64_t g = loader.total_batch_size();
    EXPECT_EQ(g, c.split ? c.batch : c.batch * p);
    const auto want = expected(c.n, g, p, r, c.drop_last);
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<bool> ends;
      EXPECT_EQ(run_pass(loader, &ends), want) << "pass " << pass;
      for (std::size_t k = 0; k < ends.size(); ++k) EXPECT_EQ(ends[k], k + 1 == ends.size());
    }
    if (!want.empty()) EXPECT_EQ(loader.remainder(), c.drop_last ? -1 : c.n % g);
  }
}

TEST(StreamDataLoaderShard, ResumeRereadsTheConsumedRounds) {
  const State state;
  const int p = state.num_processes();
  if (4 % p != 0) GTEST_SKIP() << "needs a world size dividing 4";
  StreamDataLoaderShard first(Stream(23), state, {.batch_size = 4}, {.split_batches = true});
  std::vector<Indices> seen;
  for (const Batch& batch : first) {
    seen.push_back(Indices(batch.target.data_ptr<std::int64_t>(),
                           batch.target.data_ptr<std::int64_t>() + batch.target.numel()));
    if (seen.size() == 2) break;
  }
  const auto saved = first.state_dict();
  StreamDataLoaderShard resumed(Stream(23), state, {.batch_size = 4}, {.split_batches = true});
  resumed.load_state_dict(saved);
  const auto rest = run_pass(resumed);
  const auto want = expected(23, 4, p, state.process_index(), false);
  EXPECT_EQ(rest, std::vector<Indices>(want.begin() + 2, want.end()));
}

TEST(PrepareDataLoader, PicksTheLoaderAccelerateWould) {
  const State state;
  using accelerate::DataLoaderDispatcher;
  using accelerate::DataLoaderShard;
  auto table = accelerate::prepare_data_loader(Table(), state, {.batch_size = 1});
  EXPECT_NE(dynamic_cast<DataLoaderShard<Table>*>(table.get()), nullptr);
  auto table_dispatched =
      accelerate::prepare_data_loader(Table(), state, {.batch_size = 1}, {.dispatch_batches = true});
  EXPECT_NE(dynamic_cast<DataLoaderDispatcher<Table>*>(table_dispatched.get()), nullptr);
  auto stream = accelerate::prepare_data_loader(Stream(5), state, {.batch_size = 1});
  EXPECT_NE(dynamic_cast<DataLoaderDispatcher<Stream>*>(stream.get()), nullptr);
  auto stream_local = accelerate::prepare_data_loader(Stream(5), state, {.batch_size = 1}, {.dispatch_batches = false});
  EXPECT_NE(dynamic_cast<StreamDataLoaderShard<Stream>*>(stream_local.get()), nullptr);
  // Both stream loaders hand out the same rank-local data when the stream
  // length is a multiple of the global batch.
  auto a = accelerate::prepare_data_loader(Stream(4 * state.num_processes()), state, {.batch_size = 2});
  auto b = accelerate::prepare_data_loader(Stream(4 * state.num_processes()), state, {.batch_size = 2},
                                           {.dispatch_batches = false});
  EXPECT_EQ(run_pass(*a), run_pass(*b));
}

TEST(StreamDataLoaderShard, BadOptionsAreRefused) {
  const State state;
  EXPECT_NE(error_of([&] { StreamDataLoaderShard(Stream(4), state, {.batch_size = 1}, {.dispatch_batches = true}); })
                .find("DataLoaderDispatcher"),
            std::string::npos);
  EXPECT_NE(error_of([&] { StreamDataLoaderShard(Stream(4), state, {.batch_size = 1, .num_workers = 1}); })
                .find("num_workers must be 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { StreamDataLoaderShard(Stream(4), state, {.batch_size = 0}); }).find("batch"),
            std::string::npos);
}

}  // namespace

namespace {

/// min and max over the ranks of one draw from the global torch generator.
std::pair<float, float> spread_of_a_draw() {
  float value = torch::rand({1}).item<float>();
  float low = value;
  float high = value;
  MPI_Allreduce(&value, &low, 1, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&value, &high, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
  return {low, high};
}

TEST(StreamRngTypes, EveryPassStartsWithRankZerosTorchGenerator) {
  const State state;
  const int rank = state.process_index();
  accelerate::DataLoaderShard synced(Table(), state, {.batch_size = 1, .rng_types = {"torch", "generator"}});
  accelerate::DataLoaderShard plain(Table(), state, {.batch_size = 1});
  for (int pass = 0; pass < 2; ++pass) {
    torch::manual_seed(static_cast<std::uint64_t>(100 + rank + pass));  // every rank differs
    for (const Batch& batch : plain) (void)batch;
    const auto [low, high] = spread_of_a_draw();
    if (state.num_processes() > 1) EXPECT_NE(low, high) << "without rng_types the ranks keep their own states";
    torch::manual_seed(static_cast<std::uint64_t>(200 + rank + pass));
    auto it = synced.begin();  // synchronises before the first batch
    const auto [same_low, same_high] = spread_of_a_draw();
    EXPECT_EQ(same_low, same_high) << "pass " << pass;
    for (; it != synced.end(); ++it) {
    }
  }
  // The dispatcher and the stream shard synchronise too.
  torch::manual_seed(static_cast<std::uint64_t>(300 + rank));
  auto dispatched = accelerate::prepare_data_loader(Stream(4), state, {.batch_size = 1, .rng_types = {"torch"}});
  (void)dispatched->begin();
  const auto [d_low, d_high] = spread_of_a_draw();
  EXPECT_EQ(d_low, d_high);
}

TEST(StreamRngTypes, AnUnknownGeneratorIsRefusedOnEveryRank) {
  const State state;
  const std::string message =
      error_of([&] { accelerate::DataLoaderShard(Table(), state, {.batch_size = 1, .rng_types = {"xla"}}); });
  EXPECT_NE(message.find("rng_types"), std::string::npos) << message;
  EXPECT_NE(message.find("xla"), std::string::npos) << message;
  const std::string placed = error_of([&] {
    accelerate::DataLoaderShard(Table(), accelerate::DataLoaderPlacement{}, {.batch_size = 1, .rng_types = {"torch"}});
  });
  EXPECT_NE(placed.find("without a State"), std::string::npos) << placed;
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
