// DataLoaderDispatcher at 1, 2 and 4 ranks: the main process reads, each
// rank receives exactly its slice of every global batch (checked against an
// independent model of Accelerate's rule), each sample crosses MPI at most
// once, short last batches are split evenly or dropped, streams behave like
// the sequential map-style order, resume continues the same global stream,
// and failures on the main process reach every rank.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cstdint>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/test_helpers.hpp"
#include "accelerate/data/data_loader_dispatcher.hpp"
#include "accelerate/data/seedable_sampler.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::DataLoaderConfiguration;
using accelerate::DataLoaderDispatcher;
using accelerate::DataLoaderOptions;
using accelerate::State;
using accelerate::testing::error_of;
using Batch = torch::data::Example<>;
using Indices = std::vector<std::int64_t>;

/// Sample i: data [i, 2i] (float), target i (int64). `grow_at` makes samples
/// from that index on one element longer (a shape change).
class IndexDataset : public torch::data::datasets::Dataset<IndexDataset> {
 public:
  explicit IndexDataset(std::size_t n, std::int64_t fail_at = -1, std::int64_t grow_at = -1)
      : n_(n), fail_at_(fail_at), grow_at_(grow_at) {}
  Batch get(std::size_t index) override {
    const auto i = static_cast<std::int64_t>(index);
    if (i == fail_at_) throw std::runtime_error("sample " + std::to_string(i) + " is unreadable");
    const auto f = static_cast<float>(i);
    torch::Tensor data = grow_at_ >= 0 && i >= grow_at_ ? torch::tensor({f, 2 * f, 0.0F}) : torch::tensor({f, 2 * f});
    return {data, torch::tensor(i)};
  }
  [[nodiscard]] torch::optional<std::size_t> size() const override { return n_; }

 private:
  std::size_t n_;
  std::int64_t fail_at_;
  std::int64_t grow_at_;
};

/// The samples 0 … n-1 as a stream, handed out in chunks of at most 3;
/// counts its restarts.
class CountingStream : public torch::data::datasets::StreamDataset<CountingStream> {
 public:
  explicit CountingStream(std::int64_t n) : n_(n) {}
  std::vector<Batch> get_batch(std::size_t want) override {
    std::vector<Batch> out;
    const std::int64_t take = std::min<std::int64_t>({static_cast<std::int64_t>(want), 3, n_ - next_});
    for (std::int64_t k = 0; k < take; ++k, ++next_) {
      const auto f = static_cast<float>(next_);
      out.push_back({torch::tensor({f, 2 * f}), torch::tensor(next_)});
    }
    return out;
  }
  void reset() {
    next_ = 0;
    ++resets;
  }
  [[nodiscard]] torch::optional<std::size_t> size() const override { return torch::nullopt; }
  int resets = 0;

 private:
  std::int64_t n_;
  std::int64_t next_ = 0;
};

static_assert(accelerate::StreamDataset<CountingStream>);
static_assert(!accelerate::MapStyleDataset<CountingStream>);

Indices targets(const Batch& batch) {
  const torch::Tensor t = batch.target.contiguous();
  return {t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel()};
}

/// Independent model of the dispatching rule: rank r's batches when the
/// main process reads `order` in global batches of g over p processes.
std::vector<Indices> expected_slices(const Indices& order, std::int64_t g, int p, int r, bool drop_last) {
  std::vector<Indices> out;
  const auto n = static_cast<std::int64_t>(order.size());
  for (std::int64_t first = 0; first < n; first += g) {
    const std::int64_t real = std::min(g, n - first);
    if (real < g && drop_last) break;
    Indices rows(order.begin() + first, order.begin() + first + real);
    for (std::int64_t k = 0; static_cast<std::int64_t>(rows.size()) % p != 0; ++k) rows.push_back(order[k % n]);
    const auto c = static_cast<std::int64_t>(rows.size()) / p;
    out.emplace_back(rows.begin() + r * c, rows.begin() + (r + 1) * c);
  }
  return out;
}

template <class Loader>
std::vector<Indices> run_pass(Loader& loader, std::vector<bool>* end_flags = nullptr) {
  std::vector<Indices> out;
  for (const Batch& batch : loader) {
    EXPECT_TRUE(torch::equal(batch.data.select(1, 0).to(torch::kLong), batch.target));
    out.push_back(targets(batch));
    if (end_flags != nullptr) end_flags->push_back(loader.end_of_dataloader());
  }
  return out;
}

Indices iota(std::int64_t n) {
  Indices v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

struct Case {
  std::int64_t n;
  std::int64_t batch_size;
  bool split;
  bool drop_last;
  bool shuffle;
};

TEST(DataLoaderDispatcher, EachRankReceivesExactlyItsSliceOfEveryGlobalBatch) {
  const State state;
  const int p = state.num_processes();
  const int r = state.process_index();
  for (const Case& c : std::vector<Case>{{10, 2, false, false, false}, {11, 4, false, false, false},
                                         {11, 4, false, true, false}, {9, 4, true, false, true},
                                         {3, 4, false, false, true},  {33, 3, false, false, true},
                                         {0, 2, false, false, false}, {5, 8, true, true, false}}) {
    if (c.split && c.batch_size % p != 0) continue;
    SCOPED_TRACE("n=" + std::to_string(c.n) + " batch=" + std::to_string(c.batch_size) + " split=" +
                 std::to_string(c.split) + " drop_last=" + std::to_string(c.drop_last));
    DataLoaderConfiguration config{.split_batches = c.split, .dispatch_batches = true, .data_seed = 99};
    DataLoaderDispatcher loader(IndexDataset(static_cast<std::size_t>(c.n)), state,
                                {.batch_size = c.batch_size, .shuffle = c.shuffle, .drop_last = c.drop_last},
                                config);
    const std::int64_t g = c.split ? c.batch_size : c.batch_size * p;
    EXPECT_EQ(loader.total_batch_size(), g);
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      loader.set_epoch(epoch);
      const Indices order = c.shuffle ? accelerate::seeded_permutation(c.n, 99, epoch) : iota(c.n);
      const auto want = expected_slices(order, g, p, r, c.drop_last);
      std::vector<bool> ends;
      EXPECT_EQ(run_pass(loader, &ends), want);
      EXPECT_EQ(loader.size(), static_cast<std::int64_t>(want.size()));
      for (std::size_t k = 0; k < ends.size(); ++k) EXPECT_EQ(ends[k], k + 1 == ends.size()) << "batch " << k;
      EXPECT_EQ(loader.remainder(), c.drop_last ? -1 : c.n % g);
    }
  }
}

TEST(DataLoaderDispatcher, TheMainProcessSendsEachSampleOnceAndOnlyToItsOwner) {
  const State state;
  const int p = state.num_processes();
  DataLoaderDispatcher loader(IndexDataset(64), state, {.batch_size = 4}, {.dispatch_batches = true});
  const auto batches = run_pass(loader);
  ASSERT_EQ(static_cast<std::int64_t>(batches.size()), 64 / (4 * p));
  // 64 samples, of which the main process keeps its own quarter/half/all.
  EXPECT_EQ(loader.samples_sent(), state.is_main_process() ? 64 - 64 / p : 0);
  const std::int64_t sample_bytes = 2 * sizeof(float) + sizeof(std::int64_t);
  EXPECT_EQ(loader.bytes_sent(), state.is_main_process() ? (64 - 64 / p) * sample_bytes : 0);
}

TEST(DataLoaderDispatcher, AStreamIsDispatchedLikeTheSequentialOrderAndRestartsEachPass) {
  const State state;
  const int p = state.num_processes();
  const int r = state.process_index();
  for (const Case& c : std::vector<Case>{{10, 2, false, false, false}, {11, 4, false, false, false},
                                         {11, 4, false, true, false},  {1, 4, false, false, false},
                                         {0, 4, false, false, false},  {17, 8, true, false, false}}) {
    if (c.split && c.batch_size % p != 0) continue;
    SCOPED_TRACE("stream n=" + std::to_string(c.n) + " batch=" + std::to_string(c.batch_size));
    for (const int workers : {0, 1}) {
      DataLoaderDispatcher loader(CountingStream(c.n), state,
                                  {.batch_size = c.batch_size, .drop_last = c.drop_last, .num_workers = workers},
                                  {.split_batches = c.split});
      const std::int64_t g = loader.total_batch_size();
      const auto want = expected_slices(iota(c.n), g, p, r, c.drop_last);
      for (int pass = 0; pass < 2; ++pass) {
        std::vector<bool> ends;
        EXPECT_EQ(run_pass(loader, &ends), want) << "pass " << pass << " workers " << workers;
        for (std::size_t k = 0; k < ends.size(); ++k) EXPECT_EQ(ends[k], k + 1 == ends.size());
      }
      EXPECT_EQ(loader.remainder(), c.drop_last || want.empty() ? -1 : c.n % g);
      EXPECT_EQ(loader.total_dataset_length(), -1);
    }
  }
}

TEST(DataLoaderDispatcher, WorkersYieldTheSameBatches) {
  const State state;
  DataLoaderDispatcher plain(IndexDataset(37), state, {.batch_size = 3, .shuffle = true},
                             {.dispatch_batches = true, .data_seed = 5});
  DataLoaderDispatcher threaded(IndexDataset(37), state,
                                {.batch_size = 3, .shuffle = true, .num_workers = 3, .prefetch_factor = 1},
                                {.dispatch_batches = true, .data_seed = 5});
  EXPECT_EQ(run_pass(plain), run_pass(threaded));
}

TEST(DataLoaderDispatcher, ResumeContinuesTheGlobalStreamOnThisWorldSize) {
  const State state;
  const int p = state.num_processes();
  const std::int64_t g = 4;  // split_batches: the same global batch at every world size
  if (g % p != 0) GTEST_SKIP() << "needs a world size dividing 4";
  DataLoaderConfiguration config{.split_batches = true, .dispatch_batches = true, .data_seed = 7};
  DataLoaderDispatcher full(IndexDataset(30), state, {.batch_size = g, .shuffle = true}, config);
  full.set_epoch(3);
  const auto whole = run_pass(full);

  // A position saved by a single process after 3 batches of epoch 3.
  accelerate::LoaderState saved;
  saved.seed = 7;
  saved.epoch = 3;
  saved.samples_consumed = 3 * g;
  saved.global_batch_size = g;
  saved.world_size = 1;
  saved.dataset_size = 30;
  DataLoaderDispatcher resumed(IndexDataset(30), state, {.batch_size = g, .shuffle = true}, config);
  resumed.load_state_dict(saved.state_dict());
  resumed.set_epoch(3);
  const auto rest = run_pass(resumed);
  ASSERT_EQ(rest.size() + 3, whole.size());
  EXPECT_TRUE(std::equal(rest.begin(), rest.end(), whole.begin() + 3));
  EXPECT_EQ(resumed.loader_state().samples_consumed, static_cast<std::int64_t>(whole.size()) * g);

  // A stream resumes by reading the consumed batches again on the main process.
  DataLoaderDispatcher stream(CountingStream(30), state, {.batch_size = g}, {.split_batches = true});
  saved.seed = 0;
  saved.epoch = 0;
  saved.dataset_size = -1;
  stream.load_state_dict(saved.state_dict());
  const auto stream_rest = run_pass(stream);
  const auto want = expected_slices(iota(30), g, p, state.process_index(), false);
  EXPECT_EQ(stream_rest, std::vector<Indices>(want.begin() + 3, want.end()));
}

TEST(DataLoaderDispatcher, AFailureOnTheMainProcessReachesEveryRank) {
  const State state;
  const int p = state.num_processes();
  // The dataset throws on sample 9, read in the third global batch at 1
  // rank, the second at 2, the first at 4 (batch 2 per rank).
  DataLoaderDispatcher broken(IndexDataset(40, 9), state, {.batch_size = 2}, {.dispatch_batches = true});
  // The main process rethrows the dataset's own exception; the others an Error with its text.
  const std::string message = error_of<std::exception>([&] { run_pass(broken); });
  EXPECT_NE(message.find("sample 9 is unreadable"), std::string::npos) << message;
  if (!state.is_main_process()) EXPECT_NE(message.find("main process (rank 0)"), std::string::npos) << message;

  // A shape change between global batches is a ConfigError everywhere.
  DataLoaderDispatcher growing(IndexDataset(40, -1, 2 * 2 * p), state, {.batch_size = 2},
                               {.dispatch_batches = true});
  const std::string shape = error_of([&] { run_pass(growing); });
  EXPECT_NE(shape.find("first batch dispatched had"), std::string::npos) << shape;
  EXPECT_NE(shape.find("dispatch_batches = false"), std::string::npos) << shape;

  // The loader stays usable for a new pass after an error elsewhere.
  DataLoaderDispatcher fine(IndexDataset(8), state, {.batch_size = 1}, {.dispatch_batches = true});
  EXPECT_EQ(run_pass(fine).size(), static_cast<std::size_t>((8 + p - 1) / p));
}

TEST(DataLoaderDispatcher, BadOptionsAreRefusedOnEveryRank) {
  const State state;
  const int p = state.num_processes();
  EXPECT_NE(error_of([&] { DataLoaderDispatcher(IndexDataset(4), state, {.batch_size = 0}); }).find("batch size is 0"),
            std::string::npos);
  if (p > 1) {
    const std::string split = error_of([&] {
      DataLoaderDispatcher(IndexDataset(4), state, {.batch_size = p + 1}, {.split_batches = true});
    });
    EXPECT_NE(split.find("multiple of the number of processes"), std::string::npos) << split;
  }
  EXPECT_NE(error_of([&] { DataLoaderDispatcher(CountingStream(4), state, {.batch_size = 1, .num_workers = 2}); })
                .find("one thread"),
            std::string::npos);
  EXPECT_NE(error_of([&] { DataLoaderDispatcher(CountingStream(4), state, {.batch_size = 1, .shuffle = true}); })
                .find("no indices to shuffle"),
            std::string::npos);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
