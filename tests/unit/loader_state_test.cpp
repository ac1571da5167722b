// LoaderState, resume_point and skip_first_batches: the state-dict round trip
// and its validation, the resume arithmetic (a property sweep: consume k
// global batches on W1 processes, save, load, resume on W2 processes and
// check that the ranks together read exactly the rest of the global sample
// stream), the error messages, and skipping over both kinds of shard.
#include "accelerate/data/loader_state.hpp"

#include <gtest/gtest.h>

#include "common/test_helpers.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <ranges>
#include <string>
#include <utility>
#include <vector>

#include "accelerate/data/batch_sampler_shard.hpp"
#include "accelerate/data/iterable_dataset_shard.hpp"
#include "accelerate/data/seedable_sampler.hpp"
#include "accelerate/data/skip.hpp"
#include "accelerate/error.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::BatchSamplerShard;
using accelerate::BatchSamplerShardOptions;
using accelerate::ConfigError;
using accelerate::IterableDatasetShard;
using accelerate::IterableDatasetShardOptions;
using accelerate::LoaderState;
using accelerate::resume_point;
using accelerate::ResumePoint;
using accelerate::SeedableRandomSampler;
using accelerate::skip_first_batches;
using accelerate::SkippedBatches;
using Batch = std::vector<std::int64_t>;
using Batches = std::vector<Batch>;
using Order = std::vector<std::int64_t>;

static_assert(std::ranges::view<SkippedBatches>);
static_assert(std::ranges::random_access_range<SkippedBatches>);
static_assert(std::ranges::sized_range<SkippedBatches>);

// A temporary shard would dangle under the view: that overload is deleted.
template <class S>
concept CanSkip = requires(S&& shard) { skip_first_batches(std::forward<S>(shard), 1); };
static_assert(CanSkip<const BatchSamplerShard&>);
static_assert(CanSkip<BatchSamplerShard&>);
static_assert(!CanSkip<BatchSamplerShard>);
static_assert(!CanSkip<const BatchSamplerShard>);

template <class Fn>
std::string config_error_of(Fn&& fn) {
  return accelerate::testing::error_of(std::forward<Fn>(fn));
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "\"" << (part) << "\" not in: " << (text)

BatchSamplerShardOptions on(int rank, int world, bool split = false, bool even = true) {
  return {.num_processes = world, .process_index = rank, .split_batches = split, .even_batches = even};
}

// The batch size a shard needs for global batch size g on `world` processes.
std::int64_t shard_batch_size(std::int64_t g, int world, bool split) { return split ? g : g / world; }

// The global batches of an uninterrupted epoch: batch j of every rank, in
// rank order, concatenated. This is the global sample stream cut at batches.
Batches global_batches(const Order& order, std::int64_t g, int world, bool split, bool drop_last, bool even) {
  std::vector<Batches> per_rank;
  for (int rank = 0; rank < world; ++rank) {
    BatchSamplerShard shard(order, shard_batch_size(g, world, split), drop_last, on(rank, world, split, even));
    per_rank.push_back(shard.batches());
  }
  Batches result;
  for (std::size_t j = 0; j < per_rank[0].size(); ++j) {
    Batch global;
    for (const Batches& batches : per_rank) {
      if (j < batches.size()) global.insert(global.end(), batches[j].begin(), batches[j].end());
    }
    result.push_back(global);
  }
  return result;
}

LoaderState make_state(std::uint64_t seed, std::int64_t epoch, std::int64_t consumed, std::int64_t g, int world,
                       std::int64_t dataset_size) {
  LoaderState state;
  state.seed = seed;
  state.epoch = epoch;
  state.samples_consumed = consumed;
  state.global_batch_size = g;
  state.world_size = world;
  state.dataset_size = dataset_size;
  return state;
}

// ---------------------------------------------------------------------------
// State dict

TEST(LoaderState, StateDictRoundTrip) {
  const LoaderState state = make_state(0xDEADBEEFCAFEF00DULL, 3, 96, 32, 4, 1000);
  const LoaderState::Dict dict = state.state_dict();
  EXPECT_EQ(dict, (LoaderState::Dict{{"version", 1},
                                     {"seed", static_cast<std::int64_t>(0xDEADBEEFCAFEF00DULL)},
                                     {"epoch", 3},
                                     {"samples_consumed", 96},
                                     {"global_batch_size", 32},
                                     {"world_size", 4},
                                     {"dataset_size", 1000}}));
  EXPECT_LT(dict.at("seed"), 0) << "a seed of 2^63 or more keeps its bits and appears negative";
  EXPECT_EQ(LoaderState::from_state_dict(dict), state);

  const LoaderState defaults;
  EXPECT_NO_THROW(defaults.validate());
  EXPECT_EQ(LoaderState::from_state_dict(defaults.state_dict()), defaults);
  EXPECT_EQ(defaults.dataset_size, -1);
}

TEST(LoaderState, AdvanceAndStartEpoch) {
  LoaderState state = make_state(1, 0, 0, 12, 3, 100);
  state.advance();
  state.advance(3);
  EXPECT_EQ(state.samples_consumed, 48);
  EXPECT_EQ(state.batches_consumed(), 4);
  EXPECT_CONTAINS(config_error_of([&] { state.advance(-1); }), "LoaderState::advance");
  EXPECT_CONTAINS(config_error_of([&] { state.advance(INT64_MAX / 2); }), "overflows");
  EXPECT_EQ(state.samples_consumed, 48);
  state.start_epoch(1);
  EXPECT_EQ(state.epoch, 1);
  EXPECT_EQ(state.samples_consumed, 0);
  EXPECT_CONTAINS(config_error_of([&] { state.start_epoch(-1); }), "epochs count from 0");
}

TEST(LoaderState, MissingAndUnknownKeysAreNamed) {
  const LoaderState::Dict good = make_state(5, 1, 16, 8, 2, 50).state_dict();
  for (const auto& [key, value] : good) {
    LoaderState::Dict dict = good;
    dict.erase(key);
    const std::string message = config_error_of([&] { (void)LoaderState::from_state_dict(dict); });
    EXPECT_CONTAINS(message, "LoaderState::from_state_dict");
    EXPECT_CONTAINS(message, "has no field \"" + key + "\"");
  }
  LoaderState::Dict extra = good;
  extra["samples_seen"] = 16;
  EXPECT_CONTAINS(config_error_of([&] { (void)LoaderState::from_state_dict(extra); }),
                  "unknown field \"samples_seen\"");
  EXPECT_CONTAINS(config_error_of([&] { (void)LoaderState::from_state_dict({}); }), "has no field");
}

TEST(LoaderState, BadValuesAreNamed) {
  const LoaderState::Dict good = make_state(5, 1, 16, 8, 2, 50).state_dict();
  const auto error_with = [&](const std::string& key, std::int64_t value) {
    LoaderState::Dict dict = good;
    dict[key] = value;
    return config_error_of([&] { (void)LoaderState::from_state_dict(dict); });
  };
  EXPECT_CONTAINS(error_with("version", 2), "newer Accelerate-HPC");
  EXPECT_CONTAINS(error_with("version", 0), "field \"version\" is 0");
  EXPECT_CONTAINS(error_with("epoch", -1), "field \"epoch\" is -1");
  EXPECT_CONTAINS(error_with("global_batch_size", 0), "field \"global_batch_size\" is 0");
  EXPECT_CONTAINS(error_with("global_batch_size", 9), "not a multiple of field \"world_size\"");
  EXPECT_CONTAINS(error_with("world_size", 0), "field \"world_size\" is 0");
  EXPECT_CONTAINS(error_with("world_size", std::int64_t{1} << 40), "field \"world_size\" is 1099511627776");
  EXPECT_CONTAINS(error_with("samples_consumed", -8), "field \"samples_consumed\" is -8");
  EXPECT_CONTAINS(error_with("samples_consumed", 12), "not a multiple of the global batch size 8");
  EXPECT_CONTAINS(error_with("samples_consumed", 64), "has only 7 batches");  // 50 samples: 7 batches of 8
  EXPECT_NO_THROW((void)LoaderState::from_state_dict([&] {
    LoaderState::Dict dict = good;
    dict["samples_consumed"] = 56;  // the padded last batch, completed
    return dict;
  }()));
  EXPECT_CONTAINS(error_with("dataset_size", -2), "field \"dataset_size\" is -2");
  // Every message carries the rank prefix and the remedy.
  const std::string message = error_with("epoch", -3);
  EXPECT_EQ(message.front(), '[');
  EXPECT_CONTAINS(message, "load the checkpoint");

  // Saving an invalid state fails at once, not at the next load.
  LoaderState bad = make_state(0, 0, 5, 4, 2, -1);
  EXPECT_CONTAINS(config_error_of([&] { (void)bad.state_dict(); }), "LoaderState::state_dict");
  EXPECT_CONTAINS(config_error_of([&] { bad.validate(); }), "field \"samples_consumed\" is 5");
}

// ---------------------------------------------------------------------------
// Resume arithmetic

TEST(ResumePoint, DocumentedExample) {
  // 10 samples, global batch 4. Two processes (batch 2) read one global
  // batch, [0,1] and [2,3]; the run resumes on four processes (batch 1).
  const Order order = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  LoaderState state = make_state(0, 0, 0, 4, 2, 10);
  state.advance();
  Batches got;
  for (int rank = 0; rank < 4; ++rank) {
    const ResumePoint point = resume_point(state, 4, on(rank, 4), 10);
    EXPECT_EQ(point.batch_index, 1);
    EXPECT_EQ(point.batch_size, 1);
    EXPECT_EQ(point.process_batch_size, 1);
    EXPECT_EQ(point.first_sample, 4 + rank);
    BatchSamplerShard shard(order, point.batch_size, false, on(rank, 4));
    for (const Batch& batch : skip_first_batches(shard, point.batch_index)) got.push_back(batch);
  }
  // Rank r gets [4+r] then [8+r] (the last batch padded from the start).
  EXPECT_EQ(got, (Batches{{4}, {8}, {5}, {9}, {6}, {0}, {7}, {1}}));
  // With split_batches each rank builds its shard with the global batch size.
  const ResumePoint split = resume_point(state, 4, on(3, 4, /*split=*/true), 10);
  EXPECT_EQ(split.batch_size, 4);
  EXPECT_EQ(split.process_batch_size, 1);
  EXPECT_EQ(split.first_sample, 7);
}

TEST(ResumePoint, AnyWorldSizeContinuesTheGlobalStreamExactly) {
  // Consume k global batches at world size W1 (whole or split batches),
  // save, load, resume at W2 in {1, 2, 4, 8}: batch j of the ranks together
  // must be global batch k + j of the uninterrupted epoch, for every k.
  const std::vector<int> worlds = {1, 2, 4, 8};
  int resumes = 0;
  for (std::int64_t n : {0, 1, 5, 7, 8, 13, 16, 23, 24, 31, 40, 57}) {
    for (std::int64_t g : {8, 16, 24}) {
      for (bool drop_last : {false, true}) {
        for (bool even : {true, false}) {
          const std::uint64_t seed = 1000 + static_cast<std::uint64_t>(n);
          const std::int64_t epoch = g / 8;
          const Order order = SeedableRandomSampler(n, seed, epoch).indices();
          const Batches reference = global_batches(order, g, 1, false, drop_last, even);
          Batch stream;
          for (const Batch& batch : reference) stream.insert(stream.end(), batch.begin(), batch.end());
          for (int w1 : worlds) {
            for (bool split1 : {false, true}) {
              SCOPED_TRACE("n=" + std::to_string(n) + " G=" + std::to_string(g) + " drop_last=" +
                           std::to_string(drop_last) + " even=" + std::to_string(even) + " W1=" +
                           std::to_string(w1) + " split1=" + std::to_string(split1));
              const Batches before = global_batches(order, g, w1, split1, drop_last, even);
              ASSERT_EQ(before, reference) << "the global stream must not depend on the world size";
              for (std::int64_t k = 0; k <= static_cast<std::int64_t>(before.size()); ++k) {
                // The first run: k global batches, then save.
                LoaderState state = make_state(seed, epoch, 0, g, w1, n);
                for (std::int64_t j = 0; j < k; ++j) state.advance();
                const LoaderState loaded = LoaderState::from_state_dict(state.state_dict());
                ASSERT_EQ(loaded, state);
                for (int w2 : worlds) {
                  for (bool split2 : {false, true}) {
                    // The second run: every rank on its own, from the state.
                    std::vector<Batches> per_rank;
                    for (int rank = 0; rank < w2; ++rank) {
                      const ResumePoint point = resume_point(loaded, g, on(rank, w2, split2, even), n);
                      ASSERT_EQ(point.epoch, epoch);
                      ASSERT_EQ(point.batch_index, k);
                      SeedableRandomSampler sampler(n, loaded.seed);
                      sampler.set_epoch(point.epoch);
                      BatchSamplerShard shard(sampler.indices(), point.batch_size, drop_last,
                                              on(rank, w2, split2, even));
                      Batches rest;
                      for (const Batch& batch : skip_first_batches(shard, point.batch_index)) rest.push_back(batch);
                      if (!rest.empty()) {
                        ASSERT_LT(static_cast<std::size_t>(point.first_sample), stream.size());
                        ASSERT_EQ(rest.front().front(), stream[static_cast<std::size_t>(point.first_sample)])
                            << "first_sample must name the stream position of the rank's next sample";
                      }
                      per_rank.push_back(rest);
                    }
                    Batches resumed;
                    for (std::size_t j = 0; j < per_rank[0].size(); ++j) {
                      Batch global;
                      for (const Batches& batches : per_rank) {
                        if (j < batches.size()) global.insert(global.end(), batches[j].begin(), batches[j].end());
                      }
                      resumed.push_back(global);
                    }
                    const Batches expected(before.begin() + k, before.end());
                    ASSERT_EQ(resumed, expected) << "k=" << k << " W2=" << w2 << " split2=" << split2;
                    ++resumes;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(resumes, 10000);
}

TEST(ResumePoint, StreamShardsResumeOnAnyWorldSize) {
  // The same arithmetic for IterableDatasetShard: skip_first_batches reads
  // and drops the consumed batches, and the rest matches the uninterrupted run.
  const auto run = [](std::int64_t n, std::int64_t batch_size, bool drop_last, int world, int rank, bool split,
                      std::int64_t skip) {
    Order samples(static_cast<std::size_t>(n));
    std::iota(samples.begin(), samples.end(), 100);
    IterableDatasetShard shard(samples.begin(), samples.end(),
                               {.batch_size = batch_size, .drop_last = drop_last, .num_processes = world,
                                .process_index = rank, .split_batches = split});
    Batches batches;
    for (const std::int64_t& sample : skip_first_batches(shard, skip)) {
      if (batches.empty() || static_cast<std::int64_t>(batches.back().size()) == shard.process_batch_size()) {
        batches.emplace_back();
      }
      batches.back().push_back(sample);
    }
    return batches;
  };
  for (std::int64_t n : {0, 3, 8, 19, 32, 45}) {
    for (std::int64_t g : {8, 16}) {
      for (bool drop_last : {false, true}) {
        // Uninterrupted, on one process: the global batches.
        const Batches reference = run(n, g, drop_last, 1, 0, false, 0);
        for (int w1 : {1, 2, 4, 8}) {
          for (std::int64_t k = 0; k <= static_cast<std::int64_t>(reference.size()); ++k) {
            LoaderState state = make_state(9, 0, 0, g, w1, -1);
            state.advance(k);
            const LoaderState loaded = LoaderState::from_state_dict(state.state_dict());
            for (int w2 : {1, 2, 4, 8}) {
              for (bool split : {false, true}) {
                std::vector<Batches> per_rank;
                for (int rank = 0; rank < w2; ++rank) {
                  const ResumePoint point = resume_point(loaded, g, on(rank, w2, split));
                  per_rank.push_back(run(n, point.batch_size, drop_last, w2, rank, split, point.batch_index));
                }
                Batches resumed;
                for (std::size_t j = 0; j < per_rank[0].size(); ++j) {
                  Batch global;
                  for (const Batches& batches : per_rank) {
                    global.insert(global.end(), batches[j].begin(), batches[j].end());
                  }
                  resumed.push_back(global);
                }
                ASSERT_EQ(resumed, Batches(reference.begin() + k, reference.end()))
                    << "n=" << n << " G=" << g << " drop_last=" << drop_last << " W1=" << w1 << " k=" << k
                    << " W2=" << w2 << " split=" << split;
              }
            }
          }
        }
      }
    }
  }
}

TEST(ResumePoint, DifferentGlobalBatchSizeMidEpochIsAnError) {
  const LoaderState state = make_state(1, 3, 128, 64, 8, -1);
  const std::string keep = config_error_of([&] { (void)resume_point(state, 48, on(0, 4)); });
  EXPECT_CONTAINS(keep, "resume_point");
  EXPECT_CONTAINS(keep, "global batch size of 64 (on 8 processes)");
  EXPECT_CONTAINS(keep, "this run's global batch size is 48");
  EXPECT_CONTAINS(keep, "give each of the 4 processes a batch size of 16 (or 64 with split_batches)");
  EXPECT_CONTAINS(keep, "call start_epoch(4) on the loaded LoaderState");
  // When the saved G cannot be spread over this world, say which worlds can.
  const std::string worlds = config_error_of([&] { (void)resume_point(state, 60, on(0, 6)); });
  EXPECT_CONTAINS(worlds, "divides it (1, 2, 4, 8, 16, 32, 64), not 6");
  // At the start of an epoch nothing is fixed yet: any batch size resumes.
  LoaderState fresh = state;
  fresh.start_epoch(4);
  ResumePoint point;
  ASSERT_NO_THROW(point = resume_point(fresh, 48, on(1, 4)));
  EXPECT_EQ(point.epoch, 4);
  EXPECT_EQ(point.batch_index, 0);
  EXPECT_EQ(point.batch_size, 12);
  EXPECT_EQ(point.first_sample, 12);
}

TEST(ResumePoint, OtherErrors) {
  const LoaderState state = make_state(1, 0, 48, 24, 4, 100);
  // A world size that does not divide G.
  const std::string indivisible = config_error_of([&] { (void)resume_point(state, 24, on(0, 5)); });
  EXPECT_CONTAINS(indivisible, "cannot be divided among 5 processes");
  EXPECT_CONTAINS(indivisible, "(1, 2, 3, 4, 6, 8, 12, 24)");
  // The dataset changed under a shuffled epoch.
  const std::string dataset = config_error_of([&] { (void)resume_point(state, 24, on(0, 2), 99); });
  EXPECT_CONTAINS(dataset, "dataset of 100 samples, but this run's has 99");
  EXPECT_CONTAINS(dataset, "call start_epoch(1) on the loaded LoaderState");
  EXPECT_NO_THROW((void)resume_point(state, 24, on(0, 2), 100));
  EXPECT_NO_THROW((void)resume_point(state, 24, on(0, 2), -1));  // unknown now: not checked
  LoaderState next = state;
  next.start_epoch(1);
  EXPECT_NO_THROW((void)resume_point(next, 24, on(0, 2), 99));  // nothing consumed yet
  // Bad arguments and bad states.
  EXPECT_CONTAINS(config_error_of([&] { (void)resume_point(state, 24, on(4, 4)); }), "process_index is 4");
  EXPECT_CONTAINS(config_error_of([&] { (void)resume_point(state, 0, on(0, 1)); }), "global batch size is 0");
  LoaderState bad = state;
  bad.samples_consumed = 50;
  EXPECT_CONTAINS(config_error_of([&] { (void)resume_point(bad, 24, on(0, 1)); }),
                  "field \"samples_consumed\" is 50");
  // A completed epoch resumes on an empty remainder.
  LoaderState done = make_state(1, 0, 120, 24, 4, 100);  // 5 batches of 24 (the last padded)
  const ResumePoint end = resume_point(done, 24, on(2, 4), 100);
  BatchSamplerShard shard = BatchSamplerShard::sequential(100, end.batch_size, false, on(2, 4));
  EXPECT_TRUE(skip_first_batches(shard, end.batch_index).empty());
}

// ---------------------------------------------------------------------------
// skip_first_batches

TEST(SkipFirstBatches, EqualsDroppingTheFirstBatches) {
  for (std::int64_t n = 0; n <= 30; ++n) {
    const Order order = SeedableRandomSampler(n, 5).indices();
    for (std::int64_t batch_size = 1; batch_size <= 4; ++batch_size) {
      for (int world = 1; world <= 4; ++world) {
        for (bool drop_last : {false, true}) {
          for (bool even : {true, false}) {
            for (int rank = 0; rank < world; ++rank) {
              BatchSamplerShard shard(order, batch_size, drop_last, on(rank, world, false, even));
              const Batches all = shard.batches();
              for (std::int64_t skip = 0; skip <= shard.size() + 2; ++skip) {
                const SkippedBatches view = skip_first_batches(shard, skip);
                const std::size_t first = static_cast<std::size_t>(std::min(skip, shard.size()));
                const Batches expected(all.begin() + static_cast<std::ptrdiff_t>(first), all.end());
                ASSERT_EQ(Batches(view.begin(), view.end()), expected)
                    << "n=" << n << " batch=" << batch_size << " world=" << world << " rank=" << rank
                    << " skip=" << skip;
                ASSERT_EQ(view.size(), expected.size());
                ASSERT_EQ(view.empty(), expected.empty());
                if (!expected.empty()) {
                  ASSERT_EQ(view[static_cast<std::ptrdiff_t>(expected.size()) - 1], expected.back());
                  ASSERT_EQ(view.first_batch(), static_cast<std::int64_t>(first));
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(SkipFirstBatches, SkipsByArithmeticNotByIteration) {
  // 10^15 batches cannot be iterated; skipping to the last two is immediate.
  constexpr std::int64_t kSamples = 1'000'000'000'000'000;
  const BatchSamplerShard shard = BatchSamplerShard::sequential(kSamples, 4, false, on(1, 2));
  const SkippedBatches view = skip_first_batches(shard, shard.size() - 2);
  ASSERT_EQ(view.size(), 2U);
  EXPECT_EQ(view[0], (Batch{kSamples - 12, kSamples - 11, kSamples - 10, kSamples - 9}));
  EXPECT_EQ(view[1], (Batch{kSamples - 4, kSamples - 3, kSamples - 2, kSamples - 1}));
}

TEST(SkipFirstBatches, NegativeCountsAreErrors) {
  const BatchSamplerShard shard = BatchSamplerShard::sequential(10, 2, false);
  EXPECT_CONTAINS(config_error_of([&] { (void)skip_first_batches(shard, -1); }), "cannot skip -1 batches");
  Order samples = {1, 2, 3};
  IterableDatasetShard stream(samples.begin(), samples.end(), {.batch_size = 1});
  EXPECT_CONTAINS(config_error_of([&] { (void)skip_first_batches(stream, -2); }),
                  "skip_first_batches(IterableDatasetShard): cannot skip -2 batches");
}

TEST(SkipFirstBatches, StreamShardsConsumeTheSource) {
  for (std::int64_t n = 0; n <= 25; ++n) {
    for (int world : {1, 2, 3}) {
      for (bool drop_last : {false, true}) {
        for (int rank = 0; rank < world; ++rank) {
          const IterableDatasetShardOptions options{
              .batch_size = 2, .drop_last = drop_last, .num_processes = world, .process_index = rank};
          std::vector<std::int64_t> all;
          {
            std::int64_t next = 0;
            IterableDatasetShard<std::int64_t> shard(
                [&]() -> std::optional<std::int64_t> { return next < n ? std::optional(next++) : std::nullopt; },
                options);
            for (std::int64_t sample : shard) all.push_back(sample);
          }
          const std::int64_t batches = static_cast<std::int64_t>(all.size()) / 2;
          for (std::int64_t skip = 0; skip <= batches + 2; ++skip) {
            std::int64_t next = 0;
            std::int64_t reads = 0;
            IterableDatasetShard<std::int64_t> shard(
                [&]() -> std::optional<std::int64_t> {
                  ++reads;
                  return next < n ? std::optional(next++) : std::nullopt;
                },
                options);
            IterableDatasetShard<std::int64_t>& same = skip_first_batches(shard, skip);
            EXPECT_EQ(&same, &shard);
            const std::int64_t round = 2 * world;
            if (skip < n / round) {
              EXPECT_EQ(reads, skip * round) << "skipping reads whole rounds of the source";
            }
            std::vector<std::int64_t> rest;
            for (std::int64_t sample : shard) rest.push_back(sample);
            const std::size_t first = static_cast<std::size_t>(std::min(skip, batches) * 2);
            ASSERT_EQ(rest, std::vector<std::int64_t>(all.begin() + static_cast<std::ptrdiff_t>(first), all.end()))
                << "n=" << n << " world=" << world << " rank=" << rank << " skip=" << skip;
          }
        }
      }
    }
  }
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
#undef EXPECT_CONTAINS
