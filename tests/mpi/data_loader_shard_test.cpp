// DataLoaderShard at 1, 2 and 4 ranks: coverage of the epoch by the union of
// the ranks' batches (padding only at the end), equal batch counts,
// end_of_dataloader, remainder, seeded orders, set_epoch, exact resume from
// state_dict, and worker threads yielding the same batches as the calling
// thread.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <ranges>
#include <set>
#include <string>
#include <vector>

#include "accelerate/data/data_loader_configuration.hpp"
#include "accelerate/data/data_loader_shard.hpp"
#include "accelerate/data/seedable_sampler.hpp"
#include "accelerate/error.hpp"
#include "accelerate/random/seed.hpp"
#include "accelerate/runtime/state.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::DataLoaderConfiguration;
using accelerate::DataLoaderOptions;
using accelerate::DataLoaderShard;
using accelerate::State;
using Batch = torch::data::Example<>;
using Indices = std::vector<std::int64_t>;

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

/// Sample i: data [i, -i] (float), target i (int64).
class IndexDataset : public torch::data::datasets::Dataset<IndexDataset> {
 public:
  explicit IndexDataset(std::size_t n) : n_(n) {}
  torch::data::Example<> get(std::size_t index) override {
    if (index >= n_) throw std::out_of_range("IndexDataset: index " + std::to_string(index));
    const auto i = static_cast<float>(index);
    return {torch::tensor({i, -i}), torch::tensor(static_cast<std::int64_t>(index))};
  }
  [[nodiscard]] torch::optional<std::size_t> size() const override { return n_; }

 private:
  std::size_t n_;
};

/// A dataset whose length is unknown.
class UnsizedDataset : public torch::data::datasets::Dataset<UnsizedDataset> {
 public:
  torch::data::Example<> get(std::size_t index) override {
    return {torch::zeros({1}), torch::tensor(static_cast<std::int64_t>(index))};
  }
  [[nodiscard]] torch::optional<std::size_t> size() const override { return torch::nullopt; }
};

Indices targets(const Batch& batch) {
  const torch::Tensor t = batch.target.to(torch::kCPU).contiguous();
  return {t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel()};
}

/// One pass: the target indices of every batch, and end_of_dataloader per batch.
struct PassRecord {
  std::vector<Indices> batches;
  std::vector<bool> end_flags;
};

template <class Loader>
PassRecord run_pass(Loader& loader) {
  PassRecord record;
  for (const Batch& batch : loader) {
    // The data was collated alongside: data[:, 0] == target, shape [b, 2].
    EXPECT_EQ(batch.data.dim(), 2);
    EXPECT_EQ(batch.data.size(1), 2);
    EXPECT_TRUE(torch::equal(batch.data.select(1, 0).to(torch::kLong), batch.target));
    EXPECT_EQ(batch.data.device(), loader.device());
    record.batches.push_back(targets(batch));
    record.end_flags.push_back(loader.end_of_dataloader());
  }
  return record;
}

/// Every rank's vector, in rank order.
std::vector<std::vector<std::int64_t>> all_gather(const std::vector<std::int64_t>& mine) {
  const int n = world_size();
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(n));
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> displs(static_cast<std::size_t>(n), 0);
  for (int r = 1; r < n; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<std::int64_t> flat(static_cast<std::size_t>(displs.back() + counts.back()));
  MPI_Allgatherv(mine.data(), count, MPI_INT64_T, flat.data(), counts.data(), displs.data(), MPI_INT64_T,
                 MPI_COMM_WORLD);
  std::vector<std::vector<std::int64_t>> out;
  for (int r = 0; r < n; ++r) out.emplace_back(flat.begin() + displs[r], flat.begin() + displs[r] + counts[r]);
  return out;
}

/// Batches of every rank (batch sizes are uniform within a rank here, except
/// a short last one with even_batches = false: sent with explicit sizes).
std::vector<std::vector<Indices>> gather_batches(const std::vector<Indices>& mine) {
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> flat;
  for (const auto& b : mine) {
    sizes.push_back(static_cast<std::int64_t>(b.size()));
    flat.insert(flat.end(), b.begin(), b.end());
  }
  const auto all_sizes = all_gather(sizes);
  const auto all_flat = all_gather(flat);
  std::vector<std::vector<Indices>> out(all_sizes.size());
  for (std::size_t r = 0; r < all_sizes.size(); ++r) {
    std::size_t at = 0;
    for (const std::int64_t s : all_sizes[r]) {
      out[r].emplace_back(all_flat[r].begin() + static_cast<std::ptrdiff_t>(at),
                          all_flat[r].begin() + static_cast<std::ptrdiff_t>(at + static_cast<std::size_t>(s)));
      at += static_cast<std::size_t>(s);
    }
  }
  return out;
}

/// The global stream the ranks read together: round k, rank 0 … n-1.
Indices global_stream(const std::vector<std::vector<Indices>>& per_rank) {
  Indices stream;
  std::size_t rounds = 0;
  for (const auto& r : per_rank) rounds = std::max(rounds, r.size());
  for (std::size_t k = 0; k < rounds; ++k) {
    for (const auto& r : per_rank) {
      if (k < r.size()) stream.insert(stream.end(), r[k].begin(), r[k].end());
    }
  }
  return stream;
}

Indices epoch_order(std::int64_t n, bool shuffle, std::uint64_t seed, std::int64_t epoch) {
  if (shuffle) return accelerate::seeded_permutation(n, seed, epoch);
  Indices order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

static_assert(std::input_iterator<accelerate::DataLoader::iterator>);
static_assert(std::sentinel_for<std::default_sentinel_t, accelerate::DataLoader::iterator>);
static_assert(std::ranges::input_range<DataLoaderShard<IndexDataset>&>);
static_assert(accelerate::MapStyleDataset<IndexDataset>);
static_assert(!accelerate::MapStyleDataset<int>);

struct Case {
  std::int64_t n;
  std::int64_t batch_size;
  bool shuffle;
  bool split;
};

TEST(DataLoaderConfiguration, DefaultsFollowTheSeedsAndOurDecision) {
  const DataLoaderConfiguration config;
  EXPECT_FALSE(config.split_batches);
  EXPECT_FALSE(config.dispatch_batches.has_value());
  EXPECT_TRUE(config.even_batches);
  EXPECT_TRUE(config.use_seedable_sampler);  // docs/data-loading.md: defaults to true
  EXPECT_FALSE(config.data_seed.has_value());
  EXPECT_FALSE(config.non_blocking);
  EXPECT_FALSE(config.use_stateful_dataloader);
}

// even_batches (default): the stream is the epoch's order followed by the
// first samples again; every rank yields the same number of full batches;
// end_of_dataloader only on the last batch; remainder = n % G.
TEST(DataLoaderShard, EvenBatchesCoverTheEpochWithPaddingOnlyAtTheEnd) {
  const State state;
  const int np = state.num_processes();
  const std::vector<Case> cases = {{1, 1, false, false},  {7, 2, true, false},  {10, 3, true, false},
                                   {16, 4, false, false}, {33, 4, true, false}, {33, 8, true, true},
                                   {5, 4, true, true},    {64, 4, true, false}};
  for (const Case& c : cases) {
    if (c.split && c.batch_size % np != 0) continue;
    SCOPED_TRACE("n=" + std::to_string(c.n) + " batch=" + std::to_string(c.batch_size) +
                 " shuffle=" + std::to_string(c.shuffle) + " split=" + std::to_string(c.split));
    DataLoaderConfiguration config;
    config.split_batches = c.split;
    config.data_seed = 1234;
    DataLoaderShard loader(IndexDataset(static_cast<std::size_t>(c.n)), state,
                           {.batch_size = c.batch_size, .shuffle = c.shuffle}, config);
    const std::int64_t g = c.split ? c.batch_size : c.batch_size * np;
    const std::int64_t b = g / np;
    EXPECT_EQ(loader.total_batch_size(), g);
    EXPECT_EQ(loader.total_dataset_length(), c.n);
    EXPECT_EQ(loader.remainder(), c.n % g);
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      loader.set_epoch(epoch);
      const PassRecord record = run_pass(loader);
      const std::int64_t rounds = (c.n + g - 1) / g;
      ASSERT_EQ(static_cast<std::int64_t>(record.batches.size()), rounds);
      EXPECT_EQ(loader.size(), rounds);
      for (std::size_t k = 0; k < record.batches.size(); ++k) {
        EXPECT_EQ(static_cast<std::int64_t>(record.batches[k].size()), b);
        EXPECT_EQ(record.end_flags[k], k + 1 == record.batches.size()) << "batch " << k;
      }
      EXPECT_TRUE(loader.end_of_dataloader());
      const auto per_rank = gather_batches(record.batches);
      for (const auto& r : per_rank) EXPECT_EQ(r.size(), record.batches.size());
      const Indices stream = global_stream(per_rank);
      ASSERT_EQ(static_cast<std::int64_t>(stream.size()), rounds * g);
      const Indices order = epoch_order(c.n, c.shuffle, 1234, epoch);
      // First n positions: the epoch's order, each sample exactly once.
      EXPECT_TRUE(std::equal(order.begin(), order.end(), stream.begin()));
      std::set<std::int64_t> seen(stream.begin(), stream.begin() + c.n);
      EXPECT_EQ(static_cast<std::int64_t>(seen.size()), c.n);
      // The rest: padding from the start of the epoch, cyclically.
      const std::int64_t cycle = std::min(c.n, g);
      for (std::int64_t t = c.n; t < static_cast<std::int64_t>(stream.size()); ++t) {
        EXPECT_EQ(stream[static_cast<std::size_t>(t)], order[static_cast<std::size_t>((t - c.n) % cycle)]);
      }
    }
  }
}

TEST(DataLoaderShard, UnevenBatchesVisitEverySampleOnce) {
  const State state;
  for (const std::int64_t n : {1, 9, 10, 31}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    DataLoaderConfiguration config;
    config.even_batches = false;
    config.data_seed = 7;
    DataLoaderShard loader(IndexDataset(static_cast<std::size_t>(n)), state, {.batch_size = 2, .shuffle = true},
                           config);
    const PassRecord record = run_pass(loader);
    EXPECT_EQ(static_cast<std::int64_t>(record.batches.size()), loader.size());
    for (std::size_t k = 0; k < record.end_flags.size(); ++k) {
      EXPECT_EQ(record.end_flags[k], k + 1 == record.end_flags.size());
    }
    const Indices stream = global_stream(gather_batches(record.batches));
    EXPECT_EQ(stream, epoch_order(n, true, 7, 0));  // no repeats, nothing missing
    // The state is the same on every rank at the end of the pass.
    const auto consumed = all_gather({loader.loader_state().samples_consumed});
    for (const auto& c : consumed) EXPECT_EQ(c, consumed.front());
  }
}

TEST(DataLoaderShard, DropLastStopsAtTheFirstShortRoundAndHasNoRemainder) {
  const State state;
  const int np = state.num_processes();
  DataLoaderShard loader(IndexDataset(10), state, {.batch_size = 3, .drop_last = true});
  const std::int64_t g = 3 * np;
  const PassRecord record = run_pass(loader);
  EXPECT_EQ(static_cast<std::int64_t>(record.batches.size()), 10 / g);
  EXPECT_EQ(loader.size(), 10 / g);
  EXPECT_EQ(loader.remainder(), -1);
}

TEST(DataLoaderShard, SameSeedSameOrderAndSetEpochChangesIt) {
  const State state;
  DataLoaderConfiguration config;
  config.data_seed = 99;
  const DataLoaderOptions options{.batch_size = 3, .shuffle = true};
  DataLoaderShard a(IndexDataset(40), state, options, config);
  DataLoaderShard b(IndexDataset(40), state, options, config);
  const PassRecord a0 = run_pass(a);
  EXPECT_EQ(a0.batches, run_pass(b).batches);
  a.set_epoch(0);
  EXPECT_EQ(a0.batches, run_pass(a).batches);  // the same epoch again, when asked for
  a.set_epoch(1);
  b.set_epoch(1);
  const PassRecord a1 = run_pass(a);
  EXPECT_EQ(a1.batches, run_pass(b).batches);
  // The epochs' global streams are different orders of the same samples.
  const Indices s0 = global_stream(gather_batches(a0.batches));
  const Indices s1 = global_stream(gather_batches(a1.batches));
  EXPECT_NE(s0, s1);
  EXPECT_EQ(std::set<std::int64_t>(s0.begin(), s0.end()), std::set<std::int64_t>(s1.begin(), s1.end()));
  // Another seed, another order.
  config.data_seed = 100;
  DataLoaderShard c(IndexDataset(40), state, options, config);
  EXPECT_NE(global_stream(gather_batches(run_pass(c).batches)), s0);
}

TEST(DataLoaderShard, DrawnSeedIsTheSameOnEveryRank) {
  const State state;
  DataLoaderShard loader(IndexDataset(20), state, {.batch_size = 2, .shuffle = true});
  const auto seeds = all_gather({static_cast<std::int64_t>(loader.seed())});
  for (const auto& s : seeds) EXPECT_EQ(s, seeds.front());
  const Indices stream = global_stream(gather_batches(run_pass(loader).batches));
  const Indices order = epoch_order(20, true, loader.seed(), 0);
  ASSERT_GE(stream.size(), order.size());  // with padding at 4 ranks
  EXPECT_TRUE(std::equal(order.begin(), order.end(), stream.begin()));
}

// Save after k batches (k = 0 … size), resume in a fresh loader: exactly the
// remaining batches, with and without workers.
TEST(DataLoaderShard, ResumeMidEpochGivesExactlyTheRemainingBatches) {
  const State state;
  for (const int workers : {0, 2}) {
    for (const bool even : {true, false}) {
      SCOPED_TRACE("workers=" + std::to_string(workers) + " even=" + std::to_string(even));
      DataLoaderConfiguration config;
      config.data_seed = 5;
      config.even_batches = even;
      const DataLoaderOptions options{.batch_size = 2, .shuffle = true, .num_workers = workers};
      DataLoaderShard reference(IndexDataset(23), state, options, config);
      reference.set_epoch(3);
      const PassRecord full = run_pass(reference);
      const auto size = static_cast<std::int64_t>(full.batches.size());
      for (std::int64_t k = 0; k <= size; ++k) {
        DataLoaderShard first(IndexDataset(23), state, options, config);
        first.set_epoch(3);
        accelerate::LoaderState::Dict saved = first.state_dict();
        std::int64_t taken = 0;
        for (const Batch& batch : first) {
          (void)batch;
          if (++taken == k) break;
        }
        if (k > 0) saved = first.state_dict();  // after k batches, or the whole (shorter) pass
        // The saved position is the same on every rank (one copy suffices),
        // except a rank that reached its short last batch early: it reports
        // the whole epoch, which resumes to no batch on that rank too.
        DataLoaderConfiguration other = config;
        other.data_seed = 77;  // the state's seed wins
        DataLoaderShard resumed(IndexDataset(23), state, options, other);
        resumed.load_state_dict(saved);
        if (k == size) {
          // Saved after the whole pass: the next pass is the next epoch, whole.
          EXPECT_EQ(resumed.epoch(), 4) << "k=" << k;
          resumed.set_epoch(4);
          reference.set_epoch(4);
          EXPECT_EQ(run_pass(resumed).batches, run_pass(reference).batches);
          reference.set_epoch(3);
          continue;
        }
        resumed.set_epoch(3);  // the loaded epoch keeps the position
        const PassRecord rest = run_pass(resumed);
        const std::vector<Indices> expected(full.batches.begin() + std::min(k, size), full.batches.end());
        EXPECT_EQ(rest.batches, expected) << "k=" << k;
        if (!rest.end_flags.empty()) {
          EXPECT_TRUE(rest.end_flags.back());
        }
        EXPECT_EQ(resumed.seed(), 5U);
        // The resumed pass completed epoch 3: the loop's next pass is epoch 4.
        reference.set_epoch(4);
        EXPECT_EQ(run_pass(resumed).batches, run_pass(reference).batches);
        EXPECT_EQ(resumed.epoch(), 4);
        reference.set_epoch(3);
      }
    }
  }
}

TEST(DataLoaderShard, StateDictIsIdenticalOnEveryRankBetweenSteps) {
  const State state;
  DataLoaderConfiguration config;
  config.data_seed = 11;
  DataLoaderShard loader(IndexDataset(30), state, {.batch_size = 2, .shuffle = true}, config);
  std::int64_t step = 0;
  for (const Batch& batch : loader) {
    (void)batch;
    ++step;
    const auto dict = loader.state_dict();
    EXPECT_EQ(dict.at("samples_consumed") % loader.total_batch_size(), 0);
    const auto all = all_gather({dict.at("samples_consumed"), dict.at("epoch"), dict.at("seed")});
    for (const auto& a : all) EXPECT_EQ(a, all.front()) << "step " << step;
  }
}

TEST(DataLoaderShard, WorkersYieldTheSameBatchesInTheSameOrder) {
  const State state;
  DataLoaderConfiguration config;
  config.data_seed = 3;
  for (const int workers : {1, 3, 8}) {
    for (const int prefetch : {1, 2}) {
      SCOPED_TRACE("workers=" + std::to_string(workers) + " prefetch=" + std::to_string(prefetch));
      DataLoaderShard serial(IndexDataset(101), state, {.batch_size = 3, .shuffle = true}, config);
      DataLoaderShard threaded(IndexDataset(101), state,
                               {.batch_size = 3, .shuffle = true, .num_workers = workers, .prefetch_factor = prefetch},
                               config);
      for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
        serial.set_epoch(epoch);
        threaded.set_epoch(epoch);
        auto s = serial.begin();
        auto t = threaded.begin();
        for (; s != serial.end() && t != threaded.end(); ++s, ++t) {
          EXPECT_TRUE(torch::equal(s->data, t->data));
          EXPECT_TRUE(torch::equal(s->target, t->target));
          EXPECT_EQ(serial.end_of_dataloader(), threaded.end_of_dataloader());
        }
        EXPECT_TRUE(s == serial.end());
        EXPECT_TRUE(t == threaded.end());
      }
    }
  }
}

TEST(DataLoaderShard, WorkersAreSeededFromWorkerSeed) {
  const State state;
  std::mutex mutex;
  std::map<int, std::uint64_t> seen;
  std::atomic<int> info_ok{0};
  DataLoaderConfiguration config;
  config.data_seed = 21;
  DataLoaderOptions options{.batch_size = 2, .num_workers = 3};
  options.worker_init_fn = [&](int worker, std::uint64_t seed) {
    const auto info = accelerate::current_worker_info();
    if (info && info->id == worker && info->seed == seed && info->num_workers == 3) ++info_ok;
    const std::lock_guard lock(mutex);
    seen[worker] = seed;
  };
  DataLoaderShard loader(IndexDataset(12), state, options, config);
  loader.set_epoch(4);
  (void)run_pass(loader);
  EXPECT_FALSE(accelerate::current_worker_info().has_value());  // not a worker thread
  ASSERT_EQ(seen.size(), 3U);
  EXPECT_EQ(info_ok.load(), 3);
  for (const auto& [worker, seed] : seen) {
    EXPECT_EQ(seed, accelerate::worker_seed(21, 4, state.process_index(), worker));
  }
}

TEST(DataLoaderShard, AbandonedPassWithWorkersIsCleanedUp) {
  const State state;
  DataLoaderShard loader(IndexDataset(50), state, {.batch_size = 1, .num_workers = 4, .prefetch_factor = 1});
  int taken = 0;
  for (const Batch& batch : loader) {
    (void)batch;
    if (++taken == 2) break;
  }
  // A new pass starts at batch 0 (no resume was loaded).
  EXPECT_EQ(run_pass(loader).batches.size(), static_cast<std::size_t>(loader.size()));
}

TEST(DataLoaderShard, DatasetErrorsReachTheLoop) {
  // A dataset shorter than it claims: get() throws on the missing samples.
  class Lying : public torch::data::datasets::Dataset<Lying> {
   public:
    torch::data::Example<> get(std::size_t index) override {
      if (index >= 3) throw std::runtime_error("no sample " + std::to_string(index));
      return {torch::zeros({2}), torch::tensor(static_cast<std::int64_t>(index))};
    }
    [[nodiscard]] torch::optional<std::size_t> size() const override { return 8; }
  };
  const State state;
  for (const int workers : {0, 2}) {
    DataLoaderShard loader(Lying(), accelerate::DataLoaderPlacement{}, {.batch_size = 2, .num_workers = workers});
    EXPECT_THROW(
        {
          for (const Batch& batch : loader) (void)batch;
        },
        std::runtime_error);
  }
}

TEST(DataLoaderShard, ConfigErrors) {
  const State state;
  auto expect_config_error = [](auto&& make, const std::string& needle) {
    try {
      make();
      ADD_FAILURE() << "no ConfigError; expected one mentioning " << needle;
    } catch (const accelerate::ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
  };
  expect_config_error([&] { DataLoaderShard loader(UnsizedDataset(), state); }, "size() is unknown");
  expect_config_error([&] { DataLoaderShard loader(IndexDataset(4), state, {.batch_size = 0}); },
                      "the batch size is 0");
  expect_config_error([&] { DataLoaderShard loader(IndexDataset(4), state, {.batch_size = -2}); },
                      "the batch size is -2");
  expect_config_error([&] { DataLoaderShard loader(IndexDataset(4), state, {.num_workers = -1}); }, "num_workers");
  expect_config_error([&] { DataLoaderShard loader(IndexDataset(4), state, {.num_workers = 2, .prefetch_factor = 0}); },
                      "prefetch_factor");
  DataLoaderConfiguration dispatch;
  dispatch.dispatch_batches = true;
  expect_config_error([&] { DataLoaderShard loader(IndexDataset(4), state, {}, dispatch); }, "dispatch_batches");
  DataLoaderConfiguration torch_sampler;
  torch_sampler.use_seedable_sampler = false;
  expect_config_error([&] { DataLoaderShard loader(IndexDataset(4), state, {.shuffle = true}, torch_sampler); },
                      "use_seedable_sampler");
  DataLoaderShard unshuffled(IndexDataset(4), state, {}, torch_sampler);  // fine without shuffle
  expect_config_error(
      [&] {
        DataLoaderShard loader(IndexDataset(4), accelerate::DataLoaderPlacement{.num_processes = 2}, {.shuffle = true});
      },
      "data_seed");
  // A resume with another global batch size mid-epoch names the remedy.
  DataLoaderShard saver(IndexDataset(40), state, {.batch_size = 2});
  for (const Batch& batch : saver) {
    (void)batch;
    break;
  }
  const auto saved = saver.state_dict();
  DataLoaderShard other(IndexDataset(40), state, {.batch_size = 4});
  expect_config_error([&] { other.load_state_dict(saved); }, "global batch size");
  DataLoaderShard shorter(IndexDataset(39), state, {.batch_size = 2});
  expect_config_error([&] { shorter.load_state_dict(saved); }, "dataset");
}

TEST(DataLoaderShard, PlacementWithoutStateMatchesTheStateLoader) {
  const State state;
  DataLoaderConfiguration config;
  config.data_seed = 8;
  DataLoaderShard with_state(IndexDataset(17), state, {.batch_size = 2, .shuffle = true}, config);
  DataLoaderShard with_placement(IndexDataset(17),
                                 accelerate::DataLoaderPlacement{state.num_processes(), state.process_index(),
                                                                 state.device()},
                                 {.batch_size = 2, .shuffle = true}, config);
  EXPECT_EQ(run_pass(with_state).batches, run_pass(with_placement).batches);
}

// Accelerate's iteration counter: a loop that re-enters the loader after a
// complete pass gets the next epoch's order, not the same one again; an
// abandoned pass does not count, and set_epoch still decides.
TEST(DataLoaderShard, ReenteringAfterACompletePassMovesToTheNextEpoch) {
  const State state;
  DataLoaderConfiguration config;
  config.data_seed = 31;
  DataLoaderShard loader(IndexDataset(24), state, {.batch_size = 2, .shuffle = true}, config);
  const std::int64_t n = 24;
  auto stream_of = [](const PassRecord& record) { return global_stream(gather_batches(record.batches)); };
  auto starts_with_order = [&](const Indices& stream, std::int64_t epoch) {
    const Indices order = epoch_order(n, true, 31, epoch);
    return stream.size() >= order.size() && std::equal(order.begin(), order.end(), stream.begin());
  };
  EXPECT_TRUE(starts_with_order(stream_of(run_pass(loader)), 0));
  EXPECT_EQ(loader.epoch(), 0);  // a finished pass leaves the epoch until the loop comes back
  EXPECT_TRUE(starts_with_order(stream_of(run_pass(loader)), 1));
  EXPECT_EQ(loader.epoch(), 1);
  EXPECT_TRUE(starts_with_order(stream_of(run_pass(loader)), 2));
  // An abandoned pass (break after the first batch) restarts the same epoch.
  for (const Batch& batch : loader) {
    (void)batch;
    break;
  }
  EXPECT_EQ(loader.epoch(), 3);
  EXPECT_TRUE(starts_with_order(stream_of(run_pass(loader)), 3));
  // set_epoch after a complete pass wins over the counter.
  loader.set_epoch(1);
  EXPECT_TRUE(starts_with_order(stream_of(run_pass(loader)), 1));
  // A state saved after a complete pass resumes at the next epoch, as the
  // loop that saved it would have continued.
  const auto saved = loader.state_dict();
  DataLoaderShard resumed(IndexDataset(24), state, {.batch_size = 2, .shuffle = true}, config);
  resumed.load_state_dict(saved);
  EXPECT_TRUE(starts_with_order(stream_of(run_pass(resumed)), 2));
  EXPECT_TRUE(starts_with_order(stream_of(run_pass(loader)), 2));
}

// Nothing of an epoch is left once its last batch was handed out, so a state
// saved then resumes at the next epoch with any global batch size (another
// batch size or number of processes), with and without drop_last.
TEST(DataLoaderShard, AStateSavedAtTheEndOfAnEpochResumesWithAnyBatchSize) {
  const State state;
  DataLoaderConfiguration config;
  config.data_seed = 5;
  const std::int64_t n = 24;
  for (const bool drop_last : {false, true}) {
    DataLoaderShard saver(IndexDataset(n), state, {.batch_size = 5, .shuffle = true, .drop_last = drop_last}, config);
    run_pass(saver);
    const auto saved = saver.state_dict();
    DataLoaderShard resumed(IndexDataset(n), state, {.batch_size = 3, .shuffle = true, .drop_last = drop_last}, config);
    resumed.load_state_dict(saved);
    EXPECT_EQ(resumed.epoch(), 1) << "drop_last " << drop_last;
    const Indices stream = global_stream(gather_batches(run_pass(resumed).batches));
    const Indices order = epoch_order(n, true, 5, 1);
    EXPECT_TRUE(std::equal(order.begin(), order.begin() + 3 * world_size(), stream.begin()))
        << "drop_last " << drop_last << ": the resumed pass does not start epoch 1";
  }
}

// docs/reproducibility.md: with set_seed(s) and no data_seed, the order is a
// function of s - the same on every rank (device_specific seeds included),
// the same in two runs, another for another seed.
TEST(DataLoaderShard, SetSeedDecidesTheOrderWithoutADataSeed) {
  const State state;
  const DataLoaderOptions options{.batch_size = 2, .shuffle = true};
  accelerate::set_seed(4242, /*device_specific=*/true, false, &state);
  DataLoaderShard first(IndexDataset(30), state, options);
  EXPECT_EQ(first.seed(), 4242U);
  const auto seeds = all_gather({static_cast<std::int64_t>(first.seed())});
  for (const auto& s : seeds) EXPECT_EQ(s, seeds.front());
  const Indices order = global_stream(gather_batches(run_pass(first).batches));

  accelerate::set_seed(4242);  // a second run of the same program
  DataLoaderShard second(IndexDataset(30), state, options);
  EXPECT_EQ(global_stream(gather_batches(run_pass(second).batches)), order);

  accelerate::set_seed(4243);
  DataLoaderShard other(IndexDataset(30), state, options);
  EXPECT_NE(global_stream(gather_batches(run_pass(other).batches)), order);

  // An explicit data_seed still wins over set_seed.
  DataLoaderConfiguration config;
  config.data_seed = 5;
  DataLoaderShard explicit_seed(IndexDataset(30), state, options, config);
  EXPECT_EQ(explicit_seed.seed(), 5U);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
