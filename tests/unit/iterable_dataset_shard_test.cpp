// IterableDatasetShard: the seeds' two-process examples verbatim, tail
// completion, laziness, errors, and a property sweep over stream size 0-50,
// batch size 1-8, 1-8 processes, split_batches and drop_last.
#include "accelerate/data/iterable_dataset_shard.hpp"

#include <gtest/gtest.h>

#include "common/test_helpers.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <ranges>
#include <string>
#include <type_traits>
#include <vector>

#include "accelerate/data/batch_sampler_shard.hpp"
#include "accelerate/error.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::ConfigError;
using accelerate::IterableDatasetShard;
using accelerate::IterableDatasetShardOptions;
using Samples = std::vector<std::int64_t>;

static_assert(std::ranges::input_range<IterableDatasetShard<int>>);
static_assert(std::input_iterator<IterableDatasetShard<std::string>::iterator>);

IterableDatasetShardOptions opts(std::int64_t batch_size, int rank, int world, bool split = false,
                                 bool drop_last = false) {
  return {.batch_size = batch_size,
          .drop_last = drop_last,
          .num_processes = world,
          .process_index = rank,
          .split_batches = split};
}

Samples iota(std::int64_t n) {
  Samples samples(static_cast<std::size_t>(n));
  std::iota(samples.begin(), samples.end(), 0);
  return samples;
}

// Everything one process yields, through range-for over an iterator pair.
Samples shard_of(const Samples& dataset, const IterableDatasetShardOptions& options) {
  IterableDatasetShard shard(dataset.begin(), dataset.end(), options);
  Samples got;
  for (std::int64_t sample : shard) got.push_back(sample);
  return got;
}

std::vector<Samples> shard_all(const Samples& dataset, std::int64_t batch_size, int world, bool split = false,
                               bool drop_last = false) {
  std::vector<Samples> result;
  for (int rank = 0; rank < world; ++rank) result.push_back(shard_of(dataset, opts(batch_size, rank, world, split, drop_last)));
  return result;
}

std::string what_of(const std::function<void()>& fn) { return accelerate::testing::error_of(fn); }

// ---------------------------------------------------------------------------
// seeds/002: "On two processes with an iterable dataset yielding of
// [0, 1, 2, 3, 4, 5, 6, 7], this will result in: the shard on process 0 to
// yield [0, 1, 2, 3] and the shard on process 1 to yield [4, 5, 6, 7] if this
// argument is set to False. the shard on process 0 to yield [0, 1, 4, 5] and
// the sampler on process 1 to yield [2, 3, 6, 7] if this argument is set to
// True." The batch size of the example is 4 (per process without
// split_batches, in total with it): the only one that yields these lists.

TEST(IterableDatasetShardSeed, TwoProcessesWithoutSplitBatches) {
  const Samples dataset = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(shard_of(dataset, opts(4, 0, 2, /*split=*/false)), (Samples{0, 1, 2, 3}));
  EXPECT_EQ(shard_of(dataset, opts(4, 1, 2, /*split=*/false)), (Samples{4, 5, 6, 7}));
}

TEST(IterableDatasetShardSeed, TwoProcessesWithSplitBatches) {
  const Samples dataset = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(shard_of(dataset, opts(4, 0, 2, /*split=*/true)), (Samples{0, 1, 4, 5}));
  EXPECT_EQ(shard_of(dataset, opts(4, 1, 2, /*split=*/true)), (Samples{2, 3, 6, 7}));
}

// ---------------------------------------------------------------------------

TEST(IterableDatasetShard, TailIsCompletedFromTheFirstRound) {
  // Rounds of 4: [0..3], [4..7], [8, 9] + [0, 1] from the first round.
  EXPECT_EQ(shard_all(iota(10), 2, 2), (std::vector<Samples>{{0, 1, 4, 5, 8, 9}, {2, 3, 6, 7, 0, 1}}));
  // The first round, not the start of the stream order as sorted: samples
  // keep the order the stream produced them in.
  const Samples shuffled = {7, 3, 9, 0, 5, 1, 8, 2, 6, 4, 11};
  EXPECT_EQ(shard_all(shuffled, 2, 2), (std::vector<Samples>{{7, 3, 5, 1, 6, 4}, {9, 0, 8, 2, 11, 7}}));
  EXPECT_EQ(shard_all(iota(10), 4, 2, /*split=*/true), (std::vector<Samples>{{0, 1, 4, 5, 8, 9}, {2, 3, 6, 7, 0, 1}}));
}

TEST(IterableDatasetShard, DropLastDropsTheShortRound) {
  EXPECT_EQ(shard_all(iota(10), 2, 2, false, /*drop_last=*/true), (std::vector<Samples>{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(shard_all(iota(3), 2, 2, false, true), (std::vector<Samples>{{}, {}}));
}

TEST(IterableDatasetShard, StreamShorterThanARoundRepeatsItself) {
  EXPECT_EQ(shard_all(iota(3), 2, 4), (std::vector<Samples>{{0, 1}, {2, 0}, {1, 2}, {0, 1}}));
  EXPECT_EQ(shard_all(iota(2), 4, 2, true), (std::vector<Samples>{{0, 1}, {0, 1}}));
}

TEST(IterableDatasetShard, EmptyStreamYieldsNothing) {
  for (bool split : {false, true}) {
    for (bool drop : {false, true}) {
      EXPECT_EQ(shard_all({}, 2, 2, split, drop), (std::vector<Samples>{{}, {}}));
    }
  }
}

TEST(IterableDatasetShard, ReadsTheSourceLazilyAndNeverPastItsEnd) {
  int calls = 0;
  std::int64_t next = 0;
  IterableDatasetShard<std::int64_t> shard(
      [&]() -> std::optional<std::int64_t> {
        ++calls;
        if (next == 10) return std::nullopt;
        return next++;
      },
      opts(2, 1, 2));
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(shard.next(), 2);  // reads the first round of 4
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(shard.next(), 3);
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(shard.next(), 6);
  EXPECT_EQ(calls, 8);
  EXPECT_EQ(shard.next(), 7);
  EXPECT_EQ(shard.next(), 0);  // 8, 9 then the end: this rank's half is the completion
  EXPECT_EQ(calls, 11);
  EXPECT_EQ(shard.next(), 1);
  EXPECT_EQ(shard.next(), std::nullopt);
  EXPECT_EQ(shard.next(), std::nullopt);
  EXPECT_EQ(calls, 11);  // the end was reported once and never asked again
}

TEST(IterableDatasetShard, NextBatchYieldsWholeSlices) {
  const Samples dataset = iota(10);
  IterableDatasetShard shard(dataset.begin(), dataset.end(), opts(2, 0, 2));
  EXPECT_EQ(shard.next_batch(), (Samples{0, 1}));
  EXPECT_EQ(shard.next(), 4);
  EXPECT_EQ(shard.next_batch(), (Samples{5}));  // the rest of the current slice
  EXPECT_EQ(shard.next_batch(), (Samples{8, 9}));
  EXPECT_EQ(shard.next_batch(), std::nullopt);
}

TEST(IterableDatasetShard, AnyCopyableSampleType) {
  const std::vector<std::string> words = {"a", "b", "c", "d", "e"};
  IterableDatasetShard shard(words.begin(), words.end(), opts(2, 1, 2));
  static_assert(std::is_same_v<decltype(shard), IterableDatasetShard<std::string>>);
  std::vector<std::string> got;
  for (const std::string& word : shard) got.push_back(word);
  EXPECT_EQ(got, (std::vector<std::string>{"c", "d", "b", "c"}));
}

TEST(IterableDatasetShard, SizesAndExpectedSamples) {
  IterableDatasetShard<int> plain([] { return std::optional<int>(); }, opts(3, 0, 4));
  EXPECT_EQ(plain.process_batch_size(), 3);
  EXPECT_EQ(plain.total_batch_size(), 12);
  EXPECT_EQ(plain.expected_samples(0), 0);
  EXPECT_EQ(plain.expected_samples(12), 3);
  EXPECT_EQ(plain.expected_samples(13), 6);
  IterableDatasetShard<int> split([] { return std::optional<int>(); }, opts(8, 0, 4, true, true));
  EXPECT_EQ(split.process_batch_size(), 2);
  EXPECT_EQ(split.total_batch_size(), 8);
  EXPECT_EQ(split.expected_samples(15), 2);
  EXPECT_EQ(split.expected_samples(16), 4);
}

// ---------------------------------------------------------------------------
// Errors (issue item 5).

TEST(IterableDatasetShardErrors, BatchSizeZero) {
  const std::string message = what_of([] { IterableDatasetShard<int> shard([] { return std::optional<int>(); }, opts(0, 0, 1)); });
  EXPECT_NE(message.find("IterableDatasetShard: the batch size is 0"), std::string::npos) << message;
  EXPECT_NE(message.find("batch size of 1 or more"), std::string::npos) << message;
}

TEST(IterableDatasetShardErrors, SplitBatchSizeNotAMultipleOfTheWorld) {
  const std::string message = what_of([] { IterableDatasetShard<int> shard([] { return std::optional<int>(); }, opts(6, 0, 4, true)); });
  EXPECT_NE(message.find("IterableDatasetShard: split_batches"), std::string::npos) << message;
  EXPECT_NE(message.find("multiple of 4, but it is 6"), std::string::npos) << message;
  EXPECT_NE(message.find("batch size of 4 or 8"), std::string::npos) << message;
  // Accelerate lets a batch size of 1 through (every process would get
  // nothing); here it is rejected like any other.
  EXPECT_THROW(IterableDatasetShard<int>([] { return std::optional<int>(); }, opts(1, 0, 2, true)), ConfigError);
  EXPECT_NO_THROW(IterableDatasetShard<int>([] { return std::optional<int>(); }, opts(1, 0, 1, true)));
}

TEST(IterableDatasetShardErrors, ProcessesOutOfRange) {
  EXPECT_THROW(IterableDatasetShard<int>([] { return std::optional<int>(); }, opts(2, 3, 3)), ConfigError);
  EXPECT_THROW(IterableDatasetShard<int>([] { return std::optional<int>(); }, opts(2, 0, 0)), ConfigError);
}

// ---------------------------------------------------------------------------
// Property sweep. The reference follows Accelerate's loop step by step.

Samples reference(const Samples& dataset, std::int64_t batch_size, bool drop_last, int world, int rank, bool split) {
  const auto real = static_cast<std::size_t>(split ? batch_size : batch_size * world);
  const auto per_process = static_cast<std::size_t>(split ? batch_size / world : batch_size);
  const std::size_t begin = static_cast<std::size_t>(rank) * per_process;
  Samples out;
  std::optional<Samples> first;
  Samples current;
  for (std::int64_t element : dataset) {
    current.push_back(element);
    if (current.size() == real) {
      for (std::size_t i = begin; i < begin + per_process; ++i) out.push_back(current[i]);
      if (!first) first = current;
      current.clear();
    }
  }
  if (!drop_last && !current.empty()) {
    if (!first) first = current;
    while (current.size() < real) current.insert(current.end(), first->begin(), first->end());
    for (std::size_t i = begin; i < begin + per_process; ++i) out.push_back(current[i]);
  }
  return out;
}

TEST(IterableDatasetShardProperty, SweepEveryShapeAndFlag) {
  std::mt19937_64 rng(7);
  long visited = 0;
  long rejected = 0;
  for (std::int64_t n = 0; n <= 50; ++n) {
    Samples dataset(static_cast<std::size_t>(n));
    std::iota(dataset.begin(), dataset.end(), 500);
    std::shuffle(dataset.begin(), dataset.end(), rng);
    for (std::int64_t batch_size = 1; batch_size <= 8; ++batch_size) {
      for (int world = 1; world <= 8; ++world) {
        for (int flags = 0; flags < 4; ++flags) {
          ++visited;
          const bool split = (flags & 1) != 0;
          const bool drop_last = (flags & 2) != 0;
          const std::string where = "n=" + std::to_string(n) + " batch=" + std::to_string(batch_size) +
                                    " world=" + std::to_string(world) + " split=" + std::to_string(split) +
                                    " drop_last=" + std::to_string(drop_last);
          if (split && batch_size % world != 0) {
            for (int rank = 0; rank < world; ++rank) {
              const std::string message = what_of([&] {
                IterableDatasetShard shard(dataset.begin(), dataset.end(), opts(batch_size, rank, world, split, drop_last));
              });
              ASSERT_NE(message.find("must be a multiple of " + std::to_string(world)), std::string::npos)
                  << where << ": " << message;
            }
            ++rejected;
            continue;
          }
          const std::int64_t per_process = split ? batch_size / world : batch_size;
          const std::int64_t round = split ? batch_size : batch_size * world;
          std::vector<Samples> per_rank;
          for (int rank = 0; rank < world; ++rank) {
            const auto options = opts(batch_size, rank, world, split, drop_last);
            IterableDatasetShard shard(dataset.begin(), dataset.end(), options);
            Samples got;
            for (auto it = shard.begin(); it != shard.end(); ++it) got.push_back(*it);
            ASSERT_EQ(got, reference(dataset, batch_size, drop_last, world, rank, split)) << where << " rank " << rank;
            ASSERT_EQ(static_cast<std::int64_t>(got.size()), shard.expected_samples(n)) << where;
            ASSERT_EQ(static_cast<std::int64_t>(got.size()) % per_process, 0) << where;
            // Same samples as the index-level shard of a batch sampler with
            // even batches over the same order.
            const accelerate::BatchSamplerShard batches(dataset, batch_size, drop_last,
                                                        {.num_processes = world,
                                                         .process_index = rank,
                                                         .split_batches = split,
                                                         .even_batches = true});
            Samples flat;
            for (const auto& batch : batches) flat.insert(flat.end(), batch.begin(), batch.end());
            ASSERT_EQ(got, flat) << where << " rank " << rank;
            per_rank.push_back(std::move(got));
          }
          // Equal counts on every process.
          for (const Samples& got : per_rank) ASSERT_EQ(got.size(), per_rank[0].size()) << where;
          // Reassemble the stream round by round.
          Samples stream;
          const auto step = static_cast<std::size_t>(per_process);
          for (std::size_t at = 0; at < per_rank[0].size(); at += step) {
            for (const Samples& got : per_rank) stream.insert(stream.end(), got.begin() + static_cast<std::ptrdiff_t>(at),
                                                              got.begin() + static_cast<std::ptrdiff_t>(at + step));
          }
          const auto size = static_cast<std::size_t>(n);
          if (drop_last) {
            const auto kept = static_cast<std::size_t>(n / round * round);
            ASSERT_EQ(stream, Samples(dataset.begin(), dataset.begin() + static_cast<std::ptrdiff_t>(kept))) << where;
            continue;
          }
          ASSERT_GE(stream.size(), size) << where;
          ASSERT_TRUE(std::equal(dataset.begin(), dataset.end(), stream.begin())) << where;
          const std::size_t tail = stream.size() - size;
          ASSERT_LT(static_cast<std::int64_t>(tail), round) << where;
          const std::size_t cycle = std::min(size, static_cast<std::size_t>(round));
          for (std::size_t k = 0; k < tail; ++k) ASSERT_EQ(stream[size + k], dataset[k % cycle]) << where;
        }
      }
    }
  }
  EXPECT_EQ(visited, 51L * 8 * 8 * 4);
  EXPECT_GT(rejected, 0);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
