// BatchSamplerShard: the seeds' two-process examples verbatim, the issue's
// cases, Accelerate's own expectations, errors, and a property sweep over
// dataset size 0-50, batch size 1-8, 1-8 processes and every flag.
#include "accelerate/data/batch_sampler_shard.hpp"

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
#include <vector>

#include "accelerate/error.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::BatchSamplerShard;
using accelerate::BatchSamplerShardOptions;
using accelerate::ConfigError;
using Batch = std::vector<std::int64_t>;
using Batches = std::vector<Batch>;

static_assert(std::ranges::random_access_range<BatchSamplerShard>);
static_assert(std::ranges::sized_range<BatchSamplerShard>);
static_assert(std::random_access_iterator<BatchSamplerShard::iterator>);

std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

BatchSamplerShardOptions on(int rank, int world, bool split = false, bool even = true) {
  return {.num_processes = world, .process_index = rank, .split_batches = split, .even_batches = even};
}

// What every process yields, by iterating (not through batches()).
std::vector<Batches> shard_all(const std::vector<std::int64_t>& order, std::int64_t batch_size, bool drop_last,
                               int world, bool split = false, bool even = true) {
  std::vector<Batches> result;
  for (int rank = 0; rank < world; ++rank) {
    BatchSamplerShard shard(order, batch_size, drop_last, on(rank, world, split, even));
    Batches got;
    for (const Batch& batch : shard) got.push_back(batch);
    EXPECT_EQ(shard.size(), static_cast<std::int64_t>(got.size())) << "rank " << rank;
    result.push_back(got);
  }
  return result;
}

std::string what_of(const std::function<void()>& fn) { return accelerate::testing::error_of(fn); }

// ---------------------------------------------------------------------------
// seeds/002: "On two processes with a sampler of [[0, 1, 2, 3], [4, 5, 6, 7]],
// this will result in: the sampler on process 0 to yield [0, 1, 2, 3] and the
// sampler on process 1 to yield [4, 5, 6, 7] if this argument is set to
// False. the sampler on process 0 to yield [0, 1] then [4, 5] and the sampler
// on process 1 to yield [2, 3] then [6, 7] if this argument is set to True."

TEST(BatchSamplerShardSeed, TwoProcessesWithoutSplitBatches) {
  const Batches sampler = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  const auto p0 = BatchSamplerShard::from_batches(sampler, 4, false, on(0, 2, /*split=*/false));
  const auto p1 = BatchSamplerShard::from_batches(sampler, 4, false, on(1, 2, /*split=*/false));
  EXPECT_EQ(p0.batches(), (Batches{{0, 1, 2, 3}}));
  EXPECT_EQ(p1.batches(), (Batches{{4, 5, 6, 7}}));
}

TEST(BatchSamplerShardSeed, TwoProcessesWithSplitBatches) {
  const Batches sampler = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  const auto p0 = BatchSamplerShard::from_batches(sampler, 4, false, on(0, 2, /*split=*/true));
  const auto p1 = BatchSamplerShard::from_batches(sampler, 4, false, on(1, 2, /*split=*/true));
  EXPECT_EQ(p0.batches(), (Batches{{0, 1}, {4, 5}}));
  EXPECT_EQ(p1.batches(), (Batches{{2, 3}, {6, 7}}));
}

TEST(BatchSamplerShardSeed, SameFromTheSampleOrder) {
  EXPECT_EQ(shard_all(iota(8), 4, false, 2, false), (std::vector<Batches>{{{0, 1, 2, 3}}, {{4, 5, 6, 7}}}));
  EXPECT_EQ(shard_all(iota(8), 4, false, 2, true),
            (std::vector<Batches>{{{0, 1}, {4, 5}}, {{2, 3}, {6, 7}}}));
}

// ---------------------------------------------------------------------------
// The cases.

TEST(BatchSamplerShard, EvenBatchesCompleteTheTailFromTheStart) {
  // 9 samples, batch 2, 2 ranks.
  const auto got = shard_all(iota(9), 2, false, 2);
  EXPECT_EQ(got[0], (Batches{{0, 1}, {4, 5}, {8, 0}}));
  EXPECT_EQ(got[1], (Batches{{2, 3}, {6, 7}, {1, 2}}));
}

TEST(BatchSamplerShard, UnevenBatchesLeaveTheTailShort) {
  const auto got = shard_all(iota(9), 2, false, 2, false, /*even=*/false);
  EXPECT_EQ(got[0], (Batches{{0, 1}, {4, 5}, {8}}));
  EXPECT_EQ(got[1], (Batches{{2, 3}, {6, 7}}));
}

TEST(BatchSamplerShard, SplitBatchesCompleteTheLastBatch) {
  // 10 samples, batch 4, 2 ranks, split_batches.
  const auto got = shard_all(iota(10), 4, false, 2, /*split=*/true);
  EXPECT_EQ(got[0], (Batches{{0, 1}, {4, 5}, {8, 9}}));
  EXPECT_EQ(got[1], (Batches{{2, 3}, {6, 7}, {0, 1}}));
}

TEST(BatchSamplerShard, CompletionFollowsTheShuffledOrder) {
  const std::vector<std::int64_t> order = {7, 3, 9, 0, 5, 1, 8, 2, 6};
  const auto got = shard_all(order, 2, false, 2);
  EXPECT_EQ(got[0], (Batches{{7, 3}, {5, 1}, {6, 7}}));
  EXPECT_EQ(got[1], (Batches{{9, 0}, {8, 2}, {3, 9}}));
}

TEST(BatchSamplerShard, DropLastStopsAtTheFirstShortRound) {
  // The underlying sampler drops [8]; the shard then drops the incomplete round.
  auto got = shard_all(iota(9), 2, true, 2);
  EXPECT_EQ(got[0], (Batches{{0, 1}, {4, 5}}));
  EXPECT_EQ(got[1], (Batches{{2, 3}, {6, 7}}));
  // 10 samples in 5 full batches over 3 ranks: the second round (batches 3, 4)
  // is incomplete, so even its full batches are dropped, on every rank.
  got = shard_all(iota(10), 2, true, 3);
  EXPECT_EQ(got, (std::vector<Batches>{{{0, 1}}, {{2, 3}}, {{4, 5}}}));
  // drop_last wins over even_batches = false as well.
  EXPECT_EQ(shard_all(iota(10), 2, true, 3, false, false), got);
  // Without drop_last, the round is completed: rank 2 wraps around.
  EXPECT_EQ(shard_all(iota(10), 2, false, 3),
            (std::vector<Batches>{{{0, 1}, {6, 7}}, {{2, 3}, {8, 9}}, {{4, 5}, {0, 1}}}));
}

TEST(BatchSamplerShard, DatasetSmallerThanARoundRepeatsItself) {
  EXPECT_EQ(shard_all(iota(3), 2, false, 4),
            (std::vector<Batches>{{{0, 1}}, {{2, 0}}, {{1, 2}}, {{0, 1}}}));
  EXPECT_EQ(shard_all(iota(1), 3, false, 2), (std::vector<Batches>{{{0, 0, 0}}, {{0, 0, 0}}}));
  EXPECT_EQ(shard_all(iota(3), 8, false, 2, true), (std::vector<Batches>{{{0, 1, 2, 0}}, {{1, 2, 0, 1}}}));
}

TEST(BatchSamplerShard, EmptyDatasetYieldsNothing) {
  for (bool split : {false, true}) {
    for (bool even : {false, true}) {
      for (bool drop : {false, true}) {
        for (int rank = 0; rank < 2; ++rank) {
          BatchSamplerShard shard({}, 2, drop, on(rank, 2, split, even));
          EXPECT_EQ(shard.size(), 0);
          EXPECT_TRUE(shard.empty());
          EXPECT_EQ(shard.begin(), shard.end());
          EXPECT_EQ(shard.total_length(), 0);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Accelerate's own expectations (tests/test_data_loader.py), two processes.

struct AccelerateCase {
  std::int64_t n;
  std::int64_t batch_size;
  bool drop_last;
  bool split;
  bool even;
  std::vector<Batches> expected;
};

TEST(BatchSamplerShard, MatchesAccelerateExpectations) {
  const std::vector<AccelerateCase> cases = {
      {24, 3, false, false, true, {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}},
                                   {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {21, 22, 23}}}},
      {24, 3, true, false, true, {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}},
                                  {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {21, 22, 23}}}},
      {21, 3, false, false, true, {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}},
                                   {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {0, 1, 2}}}},
      {21, 3, true, false, true, {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}}, {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}}}},
      {22, 3, false, false, true, {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}},
                                   {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {21, 0, 1}}}},
      {20, 3, false, false, true, {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 0}},
                                   {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {1, 2, 3}}}},
      {2, 3, false, false, true, {{{0, 1, 0}}, {{1, 0, 1}}}},
      {2, 3, true, false, true, {{}, {}}},
      {22, 4, false, true, true, {{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}, {20, 21}},
                                  {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}, {0, 1}}}},
      {21, 4, false, true, true, {{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}, {20, 0}},
                                  {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}, {1, 2}}}},
      {21, 4, true, true, true, {{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}},
                                 {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}}}},
      {2, 4, false, true, true, {{{0, 1}}, {{0, 1}}}},
      {2, 4, true, true, true, {{}, {}}},
      {21, 3, false, false, false, {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}},
                                    {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}}}},
      {22, 3, false, false, false, {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}},
                                    {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {21}}}},
      {20, 3, false, false, false, {{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19}},
                                    {{3, 4, 5}, {9, 10, 11}, {15, 16, 17}}}},
      {2, 3, false, false, false, {{{0, 1}}, {}}},
      {22, 4, false, true, false, {{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}, {20, 21}},
                                   {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}}}},
      {21, 4, false, true, false, {{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}, {20}},
                                   {{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}}}},
      {2, 4, false, true, false, {{{0, 1}}, {}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("n=" + std::to_string(c.n) + " batch=" + std::to_string(c.batch_size) +
                 " drop_last=" + std::to_string(c.drop_last) + " split=" + std::to_string(c.split) +
                 " even=" + std::to_string(c.even));
    EXPECT_EQ(shard_all(iota(c.n), c.batch_size, c.drop_last, 2, c.split, c.even), c.expected);
  }
}

TEST(BatchSamplerShard, VaryingBatchesAreDealtInTurn) {
  const Batches sampler = {{0, 1, 2}, {3, 4}, {5, 6, 7, 8}, {9, 10, 11}, {12, 13}};
  const auto p0 = BatchSamplerShard::from_batches(sampler, std::nullopt, false, on(0, 2, false, false));
  const auto p1 = BatchSamplerShard::from_batches(sampler, std::nullopt, false, on(1, 2, false, false));
  EXPECT_EQ(p0.size(), 3);
  EXPECT_EQ(p1.size(), 2);
  EXPECT_EQ(p0.batches(), (Batches{{0, 1, 2}, {5, 6, 7, 8}, {12, 13}}));
  EXPECT_EQ(p1.batches(), (Batches{{3, 4}, {9, 10, 11}}));
  EXPECT_FALSE(p0.batch_size().has_value());
  EXPECT_EQ(p0.total_length(), 5);
  // drop_last drops the incomplete round.
  const auto d0 = BatchSamplerShard::from_batches(sampler, std::nullopt, true, on(0, 2, false, false));
  EXPECT_EQ(d0.batches(), (Batches{{0, 1, 2}, {5, 6, 7, 8}}));
}

// ---------------------------------------------------------------------------
// Access by index, iteration, accessors.

TEST(BatchSamplerShard, RandomAccessMatchesIteration) {
  BatchSamplerShard shard(iota(23), 3, false, on(1, 3));
  const Batches all = shard.batches();
  ASSERT_EQ(static_cast<std::int64_t>(all.size()), shard.size());
  for (std::int64_t i = 0; i < shard.size(); ++i) {
    EXPECT_EQ(shard.batch(i), all[static_cast<std::size_t>(i)]);
    EXPECT_EQ(*(shard.begin() + i), all[static_cast<std::size_t>(i)]);
    EXPECT_EQ(shard.begin()[i], all[static_cast<std::size_t>(i)]);
  }
  EXPECT_EQ(shard.end() - shard.begin(), shard.size());
  // Skipping by arithmetic: views::drop on a random-access range jumps.
  Batches rest;
  for (const Batch& batch : shard | std::views::drop(2)) rest.push_back(batch);
  EXPECT_EQ(rest, Batches(all.begin() + 2, all.end()));
}

TEST(BatchSamplerShard, Accessors) {
  BatchSamplerShard plain(iota(10), 4, false, on(0, 2));
  EXPECT_EQ(plain.batch_size(), 4);
  EXPECT_EQ(plain.process_batch_size(), 4);
  EXPECT_EQ(plain.total_batch_size(), 8);
  EXPECT_EQ(plain.total_length(), 3);
  EXPECT_EQ(plain.dataset_size(), 10);
  BatchSamplerShard split(iota(10), 4, true, on(1, 2, true));
  EXPECT_EQ(split.process_batch_size(), 2);
  EXPECT_EQ(split.total_batch_size(), 4);
  EXPECT_EQ(split.total_length(), 2);
  EXPECT_TRUE(split.drop_last());
  EXPECT_EQ(split.options().process_index, 1);
}

TEST(BatchSamplerShard, SequentialEqualsTheIdentityOrder) {
  for (bool split : {false, true}) {
    for (bool even : {false, true}) {
      for (bool drop : {false, true}) {
        for (int rank = 0; rank < 4; ++rank) {
          const auto seq = BatchSamplerShard::sequential(37, 4, drop, on(rank, 4, split, even));
          const BatchSamplerShard stored(iota(37), 4, drop, on(rank, 4, split, even));
          EXPECT_EQ(seq.batches(), stored.batches());
          EXPECT_EQ(seq.size(), stored.size());
        }
      }
    }
  }
}

TEST(BatchSamplerShard, FromBatchesEqualsTheSampleOrder) {
  const Batches sampler = {{5, 1, 4}, {0, 2, 8}, {7, 3}};
  for (int rank = 0; rank < 2; ++rank) {
    const auto a = BatchSamplerShard::from_batches(sampler, 3, false, on(rank, 2));
    const BatchSamplerShard b({5, 1, 4, 0, 2, 8, 7, 3}, 3, false, on(rank, 2));
    EXPECT_EQ(a.batches(), b.batches());
  }
}

// ---------------------------------------------------------------------------
// Errors (issue item 5).

TEST(BatchSamplerShardErrors, BatchSizeZero) {
  const std::string message = what_of([] { BatchSamplerShard shard(iota(4), 0, false, on(0, 1)); });
  EXPECT_NE(message.find("BatchSamplerShard"), std::string::npos) << message;
  EXPECT_NE(message.find("the batch size is 0"), std::string::npos) << message;
  EXPECT_NE(message.find("batch size of 1 or more"), std::string::npos) << message;
  EXPECT_THROW(BatchSamplerShard::sequential(4, -3, false), ConfigError);
  EXPECT_THROW(BatchSamplerShard::from_batches({{1}}, 0, false), ConfigError);
}

TEST(BatchSamplerShardErrors, SplitBatchSizeNotAMultipleOfTheWorld) {
  const std::string message = what_of([] { BatchSamplerShard shard(iota(40), 10, false, on(0, 4, true)); });
  EXPECT_NE(message.find("split_batches"), std::string::npos) << message;
  EXPECT_NE(message.find("multiple of 4, but it is 10"), std::string::npos) << message;
  EXPECT_NE(message.find("batch size of 8 or 12"), std::string::npos) << message;
  EXPECT_NE(message.find("set split_batches to false"), std::string::npos) << message;
  // A batch smaller than the world has only the upper suggestion.
  const std::string small = what_of([] { BatchSamplerShard shard(iota(40), 3, false, on(0, 4, true)); });
  EXPECT_NE(small.find("batch size of 4,"), std::string::npos) << small;
  // Without split_batches the same size is fine.
  EXPECT_NO_THROW(BatchSamplerShard(iota(40), 10, false, on(0, 4, false)));
}

TEST(BatchSamplerShardErrors, ProcessesOutOfRange) {
  EXPECT_NE(what_of([] { BatchSamplerShard shard(iota(4), 2, false, on(2, 2)); })
                .find("process_index is 2, but a world of 2 processes has indices 0..1"),
            std::string::npos);
  EXPECT_THROW(BatchSamplerShard(iota(4), 2, false, on(-1, 2)), ConfigError);
  EXPECT_NE(what_of([] { BatchSamplerShard shard(iota(4), 2, false, on(0, 0)); }).find("num_processes is 0"),
            std::string::npos);
}

TEST(BatchSamplerShardErrors, InconsistentBatches) {
  const std::string middle = what_of([] { (void)BatchSamplerShard::from_batches({{0, 1}, {2}, {3, 4}}, 2, false); });
  EXPECT_NE(middle.find("batch 1 of 3 has 1 sample, but the batch size is 2"), std::string::npos) << middle;
  EXPECT_THROW((void)BatchSamplerShard::from_batches({{0, 1, 2}}, 2, false), ConfigError);
  EXPECT_NE(what_of([] { (void)BatchSamplerShard::from_batches({{0, 1}, {2}}, 2, true); }).find("drop_last is true"),
            std::string::npos);
  EXPECT_NE(what_of([] { (void)BatchSamplerShard::from_batches({{0}, {}}, std::nullopt, false, on(0, 1, false, false)); })
                .find("is empty"),
            std::string::npos);
  EXPECT_NE(what_of([] { (void)BatchSamplerShard::from_batches({{0}, {1, 2}}, std::nullopt, false, on(0, 2)); })
                .find("Set even_batches to false"),
            std::string::npos);
  EXPECT_NE(what_of([] {
              (void)BatchSamplerShard::from_batches({{0}, {1, 2}}, std::nullopt, false, on(0, 2, true, false));
            }).find("split_batches"),
            std::string::npos);
  EXPECT_THROW(BatchSamplerShard::sequential(-1, 2, false), ConfigError);
}

TEST(BatchSamplerShardErrors, BatchIndexOutOfRange) {
  BatchSamplerShard shard(iota(9), 2, false, on(0, 2));
  EXPECT_NE(what_of([&] { (void)shard.batch(3); }).find("there is no batch 3; process 0 has 3 batches, numbered 0..2"),
            std::string::npos);
  EXPECT_THROW((void)shard.batch(-1), ConfigError);
}

// ---------------------------------------------------------------------------
// Property sweep. The reference follows Accelerate's loops step by step over
// the underlying batches; the implementation under test is index arithmetic.

Batches underlying_batches(const std::vector<std::int64_t>& order, std::int64_t batch_size, bool drop_last) {
  Batches batches;
  for (std::size_t start = 0; start < order.size(); start += static_cast<std::size_t>(batch_size)) {
    const std::size_t stop = std::min(order.size(), start + static_cast<std::size_t>(batch_size));
    if (drop_last && stop - start < static_cast<std::size_t>(batch_size)) break;
    batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start),
                         order.begin() + static_cast<std::ptrdiff_t>(stop));
  }
  return batches;
}

Batches reference_without_split(const Batches& batches, std::size_t batch_size, bool drop_last, int world, int rank,
                                bool even) {
  Batches out;
  Batch initial;
  Batch pending;  // this rank's batch of the current round, held until the round is complete
  Batch last;
  long index = -1;
  for (std::size_t k = 0; k < batches.size(); ++k) {
    index = static_cast<long>(k);
    last = batches[k];
    if (!drop_last && index < world) initial.insert(initial.end(), last.begin(), last.end());
    if (index % world == rank) pending = last;
    if (index % world == world - 1 && last.size() == batch_size) {
      out.push_back(pending);
      pending.clear();
    }
  }
  if (drop_last || initial.empty()) return out;
  if (!even) {
    if (!pending.empty()) out.push_back(pending);
    return out;
  }
  if (pending.size() == batch_size) out.push_back(pending);
  while (initial.size() < static_cast<std::size_t>(world) * batch_size) {
    const Batch copy = initial;
    initial.insert(initial.end(), copy.begin(), copy.end());
  }
  Batch batch = last;
  if (batch.size() == batch_size) {
    batch.clear();
    ++index;
  }
  std::size_t cycle = 0;
  while (index % world != 0 || !batch.empty()) {
    const std::size_t end = cycle + batch_size - batch.size();
    batch.insert(batch.end(), initial.begin() + static_cast<std::ptrdiff_t>(cycle),
                 initial.begin() + static_cast<std::ptrdiff_t>(end));
    if (index % world == rank) out.push_back(batch);
    cycle = end;
    batch.clear();
    ++index;
  }
  return out;
}

Batch python_slice(const Batch& batch, std::size_t begin, std::size_t end) {
  begin = std::min(begin, batch.size());
  end = std::min(end, batch.size());
  return Batch(batch.begin() + static_cast<std::ptrdiff_t>(begin), batch.begin() + static_cast<std::ptrdiff_t>(end));
}

Batches reference_with_split(const Batches& batches, std::size_t batch_size, bool drop_last, int world, int rank,
                             bool even) {
  Batches out;
  const std::size_t length = batch_size / static_cast<std::size_t>(world);
  const std::size_t begin = length * static_cast<std::size_t>(rank);
  Batch initial;
  for (std::size_t k = 0; k < batches.size(); ++k) {
    if (k == 0) initial = batches[k];
    if (batches[k].size() == batch_size) out.push_back(python_slice(batches[k], begin, begin + length));
  }
  if (drop_last || initial.empty() || batches.back().size() == batch_size) return out;
  const Batch& last = batches.back();
  if (!even) {
    if (last.size() > begin) out.push_back(python_slice(last, begin, begin + length));
    return out;
  }
  while (initial.size() < batch_size) {
    const Batch copy = initial;
    initial.insert(initial.end(), copy.begin(), copy.end());
  }
  Batch completed = last;
  completed.insert(completed.end(), initial.begin(), initial.end());
  out.push_back(python_slice(completed, begin, begin + length));
  return out;
}

TEST(BatchSamplerShardProperty, SweepEveryShapeAndFlag) {
  std::mt19937_64 rng(20240611);
  long visited = 0;
  long checked = 0;  // configurations that reached the even-tail checks
  long rejected = 0;
  for (std::int64_t n = 0; n <= 50; ++n) {
    // Sample values differ from positions, and the order is shuffled, so a
    // position/value mix-up or a completion from the unshuffled start shows.
    std::vector<std::int64_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 1000);
    std::shuffle(order.begin(), order.end(), rng);
    for (std::int64_t batch_size = 1; batch_size <= 8; ++batch_size) {
      for (int world = 1; world <= 8; ++world) {
        for (int flags = 0; flags < 8; ++flags) {
          ++visited;
          const bool split = (flags & 1) != 0;
          const bool even = (flags & 2) != 0;
          const bool drop_last = (flags & 4) != 0;
          const std::string where = "n=" + std::to_string(n) + " batch=" + std::to_string(batch_size) +
                                    " world=" + std::to_string(world) + " split=" + std::to_string(split) +
                                    " even=" + std::to_string(even) + " drop_last=" + std::to_string(drop_last);
          if (split && batch_size % world != 0) {
            for (int rank = 0; rank < world; ++rank) {
              const std::string message =
                  what_of([&] { BatchSamplerShard shard(order, batch_size, drop_last, on(rank, world, split, even)); });
              ASSERT_NE(message.find("must be a multiple of " + std::to_string(world)), std::string::npos)
                  << where << ": " << message;
            }
            ++rejected;
            continue;
          }
          const Batches underlying = underlying_batches(order, batch_size, drop_last);
          const std::int64_t process_batch = split ? batch_size / world : batch_size;
          const std::int64_t round = split ? batch_size : batch_size * world;

          std::vector<Batches> per_rank;
          for (int rank = 0; rank < world; ++rank) {
            const BatchSamplerShard shard(order, batch_size, drop_last, on(rank, world, split, even));
            Batches got;
            for (const Batch& batch : shard) got.push_back(batch);
            ASSERT_EQ(shard.size(), static_cast<std::int64_t>(got.size())) << where << " rank " << rank;
            ASSERT_EQ(shard.total_length(), static_cast<std::int64_t>(underlying.size())) << where;
            const Batches expected =
                split ? reference_with_split(underlying, static_cast<std::size_t>(batch_size), drop_last, world,
                                             rank, even)
                      : reference_without_split(underlying, static_cast<std::size_t>(batch_size), drop_last, world,
                                                rank, even);
            ASSERT_EQ(got, expected) << where << " rank " << rank;
            per_rank.push_back(std::move(got));
          }

          // Equal batch counts and sizes when even (drop_last or even_batches).
          std::size_t most = 0;
          std::size_t fewest = per_rank[0].size();
          for (const Batches& got : per_rank) {
            most = std::max(most, got.size());
            fewest = std::min(fewest, got.size());
            for (std::size_t i = 0; i < got.size(); ++i) {
              if (even || drop_last || i + 1 < got.size()) {
                ASSERT_EQ(static_cast<std::int64_t>(got[i].size()), process_batch) << where;
              } else {
                ASSERT_GE(got[i].size(), 1U) << where;
                ASSERT_LE(static_cast<std::int64_t>(got[i].size()), process_batch) << where;
              }
            }
          }
          if (even || drop_last) {
            ASSERT_EQ(most, fewest) << where;
          }
          ASSERT_LE(most - fewest, 1U) << where;

          // Reassemble the stream round by round, rank by rank.
          std::vector<std::int64_t> stream;
          for (std::size_t i = 0; i < most; ++i) {
            for (const Batches& got : per_rank) {
              if (i < got.size()) stream.insert(stream.end(), got[i].begin(), got[i].end());
            }
          }
          const auto size = static_cast<std::size_t>(n);
          if (drop_last) {
            // No duplicates, and exactly the samples of the complete rounds.
            const auto kept = static_cast<std::size_t>(n / round * round);
            ASSERT_EQ(stream, std::vector<std::int64_t>(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept)))
                << where;
            continue;
          }
          // Every sample covered, once and in order, before any duplicate.
          ASSERT_GE(stream.size(), size) << where;
          ASSERT_TRUE(std::equal(order.begin(), order.end(), stream.begin())) << where;
          const std::size_t tail = stream.size() - size;
          if (!even) {
            ASSERT_EQ(tail, 0U) << where;
            continue;
          }
          // Duplicates only at the end: less than a round, taken cyclically
          // from the first samples of the epoch, in the shuffled order.
          ASSERT_LT(static_cast<std::int64_t>(tail), round) << where;
          ASSERT_EQ(stream.size() % static_cast<std::size_t>(round), 0U) << where;
          const std::size_t cycle = std::min(size, static_cast<std::size_t>(round));
          for (std::size_t k = 0; k < tail; ++k) ASSERT_EQ(stream[size + k], order[k % cycle]) << where;
          ++checked;
        }
      }
    }
  }
  // The sweep really ran the whole grid.
  EXPECT_EQ(visited, 51L * 8 * 8 * 8);
  EXPECT_GT(checked, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
