// Seeded shuffling: SplitMix64 against its published reference vector,
// golden values of shuffle format 1 (computed by an independent big-integer
// implementation of the documented algorithm; they must never change),
// permutation and uniformity properties, worker seeds, and the sampler
// together with BatchSamplerShard.
#include "accelerate/data/seedable_sampler.hpp"

#include <gtest/gtest.h>

#include "common/test_helpers.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "accelerate/data/batch_sampler_shard.hpp"
#include "accelerate/error.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::BatchSamplerShard;
using accelerate::ConfigError;
using accelerate::SeedableRandomSampler;
using accelerate::seeded_permutation;
using accelerate::shuffle_key;
using accelerate::SplitMix64;
using accelerate::worker_seed;
using Order = std::vector<std::int64_t>;

// The format is checked at compile time too: a change fails the build.
static_assert(shuffle_key(0, 0) == 5838942330699337219ULL);
static_assert(worker_seed(42, 0, 0, 0) == 1164943407431010049ULL);
static_assert(accelerate::kShuffleDomain == 0x4143432D53485546ULL);  // "ACC-SHUF"
static_assert(accelerate::kWorkerDomain == 0x4143432D574F524BULL);   // "ACC-WORK"

bool is_permutation_of_iota(Order order) {
  std::sort(order.begin(), order.end());
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i] != static_cast<std::int64_t>(i)) return false;
  }
  return true;
}

template <class Fn>
std::string config_error_of(Fn&& fn) {
  return accelerate::testing::error_of(std::forward<Fn>(fn));
}

// ---------------------------------------------------------------------------
// SplitMix64

TEST(SplitMix64, MatchesThePublishedReferenceVector) {
  // splitmix64.c (Vigna) seeded with 1234567; also Java's SplittableRandom.
  SplitMix64 generator(1234567);
  const std::vector<std::uint64_t> expected = {6457827717110365317ULL, 3203168211198807973ULL,
                                               9817491932198370423ULL, 4593380528125082431ULL,
                                               16408922859458223821ULL};
  for (std::uint64_t value : expected) EXPECT_EQ(generator.next(), value);
  EXPECT_EQ(SplitMix64::hash(1234567), 6457827717110365317ULL);
}

TEST(SplitMix64, MultiplyIsTheFull128BitProduct) {
  __extension__ using u128 = unsigned __int128;
  std::vector<std::uint64_t> values = {0, 1, 2, 0xFFFFFFFFULL, 0x100000000ULL, ~0ULL, ~0ULL - 1, 1ULL << 63};
  SplitMix64 generator(7);
  for (int i = 0; i < 200; ++i) values.push_back(generator.next());
  for (std::uint64_t a : values) {
    for (std::uint64_t b : values) {
      std::uint64_t high = 0;
      std::uint64_t low = 0;
      SplitMix64::multiply(a, b, high, low);
      const u128 product = static_cast<u128>(a) * b;
      ASSERT_EQ(high, static_cast<std::uint64_t>(product >> 64)) << a << " * " << b;
      ASSERT_EQ(low, static_cast<std::uint64_t>(product)) << a << " * " << b;
    }
  }
}

TEST(SplitMix64, BelowFollowsLemiresMethodIncludingRejections) {
  // A bound just above 2^63 rejects about half of the draws: this pins the
  // rejection path of the format, not only the common one.
  SplitMix64 generator(99);
  const std::uint64_t big = (1ULL << 63) + 12345;
  EXPECT_EQ(generator.below(big), 291991308351747672ULL);
  EXPECT_EQ(generator.below(big), 7699299500860445118ULL);
  EXPECT_EQ(generator.below(big), 943729858380536666ULL);
  EXPECT_EQ(generator.below(big), 6187898137611279099ULL);
  const std::vector<std::uint64_t> small = {2, 1, 1, 1, 2, 0};
  for (std::uint64_t value : small) EXPECT_EQ(generator.below(3), value);

  SplitMix64 one(5);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(one.below(1), 0U);
  SplitMix64 zero(5);
  EXPECT_EQ(zero.below(0), 0U);
  EXPECT_EQ(zero.state(), 5U) << "a bound of 0 must not draw";
}

TEST(SplitMix64, BelowRejectsExactlyTheLowWordsUnderTheThreshold) {
  // For this bound the threshold (2^64 - bound) mod bound is 2^63 - 12345.
  // The states were found by inverting M, so that the first draw's product
  // has a low word of exactly threshold - 1 (rejected: a second draw) and
  // exactly threshold (accepted).
  const std::uint64_t bound = (1ULL << 63) + 12345;
  const std::uint64_t threshold = (1ULL << 63) - 12345;
  const auto first_low = [&](std::uint64_t state) {
    SplitMix64 probe(state);
    std::uint64_t high = 0;
    std::uint64_t low = 0;
    SplitMix64::multiply(probe.next(), bound, high, low);
    return low;
  };
  constexpr std::uint64_t kRejected = 10603422491712874664ULL;
  constexpr std::uint64_t kAccepted = 3558559446808474027ULL;
  ASSERT_EQ(first_low(kRejected), threshold - 1);
  ASSERT_EQ(first_low(kAccepted), threshold);
  SplitMix64 rejected(kRejected);
  EXPECT_EQ(rejected.below(bound), 6428953314581407822ULL);
  EXPECT_EQ(rejected.state(), kRejected + 2 * SplitMix64::kIncrement) << "two draws";
  SplitMix64 accepted(kAccepted);
  EXPECT_EQ(accepted.below(bound), 9223372036854788152ULL);
  EXPECT_EQ(accepted.state(), kAccepted + SplitMix64::kIncrement) << "one draw";
}

TEST(SplitMix64, BelowIsUniform) {
  SplitMix64 generator(2024);
  constexpr int kDraws = 70000;
  std::vector<int> counts(7, 0);
  for (int i = 0; i < kDraws; ++i) {
    const std::uint64_t value = generator.below(7);
    ASSERT_LT(value, 7U);
    ++counts[value];
  }
  for (int count : counts) {
    EXPECT_NEAR(count, kDraws / 7, 600) << "expected about 10000 of each (sd ~93)";
  }
}

// ---------------------------------------------------------------------------
// Shuffle format 1: golden values

TEST(SeededPermutation, GoldenKeys) {
  EXPECT_EQ(shuffle_key(0, 0), 5838942330699337219ULL);
  EXPECT_EQ(shuffle_key(42, 3), 14850253493315981551ULL);
}

TEST(SeededPermutation, GoldenOrders) {
  EXPECT_EQ(seeded_permutation(10, 42, 0), (Order{0, 6, 2, 9, 5, 8, 4, 3, 7, 1}));
  EXPECT_EQ(seeded_permutation(10, 42, 1), (Order{2, 9, 7, 6, 8, 0, 5, 3, 1, 4}));
  EXPECT_EQ(seeded_permutation(10, 43, 0), (Order{8, 0, 6, 5, 4, 3, 9, 7, 1, 2}));
  EXPECT_EQ(seeded_permutation(16, 2024, 7), (Order{1, 5, 2, 0, 7, 4, 11, 13, 6, 9, 14, 8, 12, 15, 10, 3}));
  EXPECT_EQ(seeded_permutation(20, ~0ULL, 0),
            (Order{4, 12, 9, 1, 17, 11, 18, 13, 14, 7, 19, 15, 8, 3, 6, 5, 10, 16, 0, 2}));
  const Order large = seeded_permutation(1000, 42, 0);
  EXPECT_EQ(Order(large.begin(), large.begin() + 8), (Order{992, 231, 208, 228, 403, 708, 887, 63}));
  EXPECT_EQ(Order(large.end() - 4, large.end()), (Order{682, 473, 777, 183}));
}

// ---------------------------------------------------------------------------
// Shuffle properties

TEST(SeededPermutation, IsAPermutation) {
  for (std::int64_t n = 0; n <= 300; n += (n < 40 ? 1 : 37)) {
    for (std::uint64_t seed : {0ULL, 1ULL, 42ULL, ~0ULL}) {
      for (std::int64_t epoch : {0, 1, 17}) {
        const Order order = seeded_permutation(n, seed, epoch);
        ASSERT_EQ(static_cast<std::int64_t>(order.size()), n);
        ASSERT_TRUE(is_permutation_of_iota(order)) << "n=" << n << " seed=" << seed << " epoch=" << epoch;
      }
    }
  }
  EXPECT_TRUE(seeded_permutation(0, 1, 0).empty());
  EXPECT_EQ(seeded_permutation(1, 1, 0), (Order{0}));
}

TEST(SeededPermutation, SameSeedAndEpochGiveTheSameOrder) {
  for (std::int64_t n : {2, 7, 64, 1001}) {
    for (std::int64_t epoch : {0, 3}) {
      SeedableRandomSampler a(n, 1234, epoch);
      SeedableRandomSampler b(n, 1234);  // built separately, reaching the epoch by set_epoch
      b.set_epoch(epoch + 5);
      b.set_epoch(epoch);
      EXPECT_EQ(a.indices(), b.indices()) << "n=" << n;
      EXPECT_EQ(a.indices(), seeded_permutation(n, 1234, epoch));
      EXPECT_EQ(Order(a.begin(), a.end()), a.indices());
    }
  }
}

TEST(SeededPermutation, DifferentSeedOrEpochGivesADifferentOrder) {
  std::set<Order> seen;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    for (std::int64_t epoch = 0; epoch < 10; ++epoch) {
      EXPECT_TRUE(seen.insert(seeded_permutation(50, seed, epoch)).second) << "seed=" << seed << " epoch=" << epoch;
    }
  }
  // Accelerate seeds its generator with seed + epoch; here the two are mixed,
  // so neighbouring runs do not replay each other's epochs shifted by one.
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    EXPECT_NE(seeded_permutation(50, seed, 1), seeded_permutation(50, seed + 1, 0));
  }
}

TEST(SeededPermutation, AllOrdersAreEquallyLikely) {
  // 24 orders of 4 samples over 24000 seeds: about 1000 each (sd ~31). An
  // off-by-one in Fisher–Yates (Sattolo's cycle, or a pick among 0..i-1)
  // makes some orders impossible; a biased pick skews the counts.
  std::map<Order, int> counts;
  for (std::uint64_t seed = 0; seed < 24000; ++seed) ++counts[seeded_permutation(4, seed, 0)];
  EXPECT_EQ(counts.size(), 24U);
  for (const auto& [order, count] : counts) EXPECT_NEAR(count, 1000, 160);
  // And over epochs of one seed, each sample is equally likely at each position.
  constexpr int kEpochs = 20000;
  std::vector<std::vector<int>> at(5, std::vector<int>(5, 0));
  for (std::int64_t epoch = 0; epoch < kEpochs; ++epoch) {
    const Order order = seeded_permutation(5, 7, epoch);
    for (std::size_t p = 0; p < 5; ++p) ++at[p][static_cast<std::size_t>(order[p])];
  }
  for (const auto& row : at) {
    for (int count : row) EXPECT_NEAR(count, kEpochs / 5, 300);  // sd ~57
  }
}

TEST(SeededPermutation, RejectsNegativeSizesAndEpochs) {
  EXPECT_NE(config_error_of([] { (void)seeded_permutation(-1, 0, 0); }).find("dataset size is -1"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { (void)seeded_permutation(3, 0, -2); }).find("epoch is -2"), std::string::npos);
  EXPECT_NE(config_error_of([] { SeedableRandomSampler sampler(-5, 0); }).find("SeedableRandomSampler"),
            std::string::npos);
  SeedableRandomSampler sampler(10, 3, 2);
  const std::string message = config_error_of([&] { sampler.set_epoch(-1); });
  EXPECT_NE(message.find("SeedableRandomSampler::set_epoch"), std::string::npos) << message;
  EXPECT_NE(message.find("epochs count from 0"), std::string::npos) << message;
  EXPECT_EQ(sampler.epoch(), 2) << "a rejected epoch leaves the sampler as it was";
  EXPECT_EQ(sampler.indices(), seeded_permutation(10, 3, 2));
}

TEST(SeedableRandomSampler, Accessors) {
  SeedableRandomSampler sampler(12, 99, 4);
  EXPECT_EQ(sampler.size(), 12);
  EXPECT_EQ(sampler.seed(), 99U);
  EXPECT_EQ(sampler.epoch(), 4);
  sampler.set_epoch(5);
  EXPECT_EQ(sampler.epoch(), 5);
  EXPECT_EQ(sampler.indices(), seeded_permutation(12, 99, 5));
  SeedableRandomSampler empty(0, 1);
  EXPECT_EQ(empty.begin(), empty.end());
}

TEST(SeedableRandomSampler, EveryRankShardsTheSameOrder) {
  // Each "rank" builds its own sampler from the shared seed, as ranks do
  // without communicating; together they cover the epoch exactly once.
  for (int world : {1, 2, 3, 4, 8}) {
    for (std::int64_t n : {0, 1, 9, 37, 64}) {
      std::vector<std::int64_t> seen;
      for (int rank = 0; rank < world; ++rank) {
        SeedableRandomSampler sampler(n, 31337);
        sampler.set_epoch(2);
        BatchSamplerShard shard(sampler.indices(), 4, /*drop_last=*/false,
                                {.num_processes = world, .process_index = rank, .even_batches = false});
        for (const auto& batch : shard) seen.insert(seen.end(), batch.begin(), batch.end());
      }
      EXPECT_TRUE(is_permutation_of_iota(seen)) << "world=" << world << " n=" << n;
    }
  }
}

// ---------------------------------------------------------------------------
// Worker seeds

TEST(WorkerSeed, GoldenValues) {
  EXPECT_EQ(worker_seed(42, 0, 0, 0), 1164943407431010049ULL);
  EXPECT_EQ(worker_seed(42, 5, 3, 2), 5056941897949002249ULL);
}

TEST(WorkerSeed, EveryInputMatters) {
  std::set<std::uint64_t> seeds;
  int count = 0;
  for (std::uint64_t seed : {0ULL, 1ULL, 2ULL, 42ULL}) {
    for (std::int64_t epoch = 0; epoch < 4; ++epoch) {
      for (int rank = 0; rank < 8; ++rank) {
        for (int worker = 0; worker < 8; ++worker) {
          seeds.insert(worker_seed(seed, epoch, rank, worker));
          ++count;
        }
      }
    }
  }
  EXPECT_EQ(seeds.size(), static_cast<std::size_t>(count)) << "no two (seed, epoch, rank, worker) share a seed";
  // Swapping rank and worker, or epoch and rank, must not collide either.
  EXPECT_NE(worker_seed(7, 0, 1, 2), worker_seed(7, 0, 2, 1));
  EXPECT_NE(worker_seed(7, 1, 0, 0), worker_seed(7, 0, 1, 0));
  // The worker domain is separate from the shuffle domain.
  EXPECT_NE(worker_seed(7, 0, 0, 0), shuffle_key(7, 0));
}

TEST(WorkerSeed, IsWellMixed) {
  // Flipping any one bit of any input flips about half of the 64 output bits.
  long total = 0;
  int trials = 0;
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t flip = 1ULL << bit;
    const std::uint64_t base = worker_seed(1000, 3, 5, 1);
    total += std::popcount(base ^ worker_seed(1000 ^ flip, 3, 5, 1));
    total += std::popcount(base ^ worker_seed(1000, static_cast<std::int64_t>(3 ^ flip), 5, 1));
    trials += 2;
    if (bit < 31) {
      total += std::popcount(base ^ worker_seed(1000, 3, 5 ^ (1 << bit), 1));
      total += std::popcount(base ^ worker_seed(1000, 3, 5, 1 ^ (1 << bit)));
      trials += 2;
    }
  }
  const double mean = static_cast<double>(total) / trials;
  EXPECT_GT(mean, 30.0);
  EXPECT_LT(mean, 34.0);
  // Neighbouring workers are not neighbouring seeds (as base_seed + id would be).
  for (int worker = 0; worker < 16; ++worker) {
    const std::uint64_t a = worker_seed(5, 0, 0, worker);
    const std::uint64_t b = worker_seed(5, 0, 0, worker + 1);
    EXPECT_GT(std::popcount(a ^ b), 12) << "worker " << worker;
  }
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
