#include "accelerate/data/seedable_sampler.hpp"

#include <numeric>
#include <string>
#include <string_view>
#include <utility>

#include "accelerate/error.hpp"

// Shuffle format 1 (include/accelerate/data/seedable_sampler.hpp and
// docs/data-loading.md, "Seeded shuffling"). Any change to what this file
// computes changes the order of every saved run: it needs a new format, not
// an edit. The golden values in tests/unit/seedable_sampler_test.cpp guard it.

namespace accelerate {
namespace {

using std::int64_t;
using std::uint64_t;

void check_size_and_epoch(std::string_view component, int64_t dataset_size, int64_t epoch) {
  if (dataset_size < 0) {
    throw ConfigError(std::string(component) + ": the dataset size is " + std::to_string(dataset_size) +
                      "; it cannot be negative. Pass the number of samples.");
  }
  if (epoch < 0) {
    throw ConfigError(std::string(component) + ": the epoch is " + std::to_string(epoch) +
                      "; epochs count from 0. Pass the index of the epoch about to start.");
  }
}

}  // namespace

std::vector<int64_t> seeded_permutation(int64_t dataset_size, uint64_t seed, int64_t epoch) {
  check_size_and_epoch("seeded_permutation", dataset_size, epoch);
  std::vector<int64_t> order(static_cast<std::size_t>(dataset_size));
  std::iota(order.begin(), order.end(), int64_t{0});
  SplitMix64 stream(shuffle_key(seed, epoch));
  // Durstenfeld's Fisher–Yates, from the back: position i takes a uniform
  // pick among positions 0..i. One draw per position (more on a rejection).
  for (int64_t i = dataset_size - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(stream.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

SeedableRandomSampler::SeedableRandomSampler(int64_t dataset_size, uint64_t seed, int64_t epoch)
    : seed_(seed), epoch_(epoch) {
  check_size_and_epoch("SeedableRandomSampler", dataset_size, epoch);
  order_ = seeded_permutation(dataset_size, seed, epoch);
}

void SeedableRandomSampler::set_epoch(int64_t epoch) {
  check_size_and_epoch("SeedableRandomSampler::set_epoch", size(), epoch);
  if (epoch == epoch_) return;
  order_ = seeded_permutation(size(), seed_, epoch);
  epoch_ = epoch;
}

}  // namespace accelerate
