// Seeded shuffling (seeds: DataLoaderConfiguration's use_seedable_sampler and
// data_seed; SeedableRandomSampler). The sample order of an epoch is a pure
// function of (seed, epoch, dataset size): every rank computes the same order
// without communicating, every run and every LibTorch version computes the
// same order, and nothing reads or advances torch's global generator.
//
// The algorithm is a stable format ("shuffle format 1"), defined below and in
// docs/data-loading.md, "Seeded shuffling". A checkpoint stores only
// (seed, epoch, samples consumed), so changing any step of it would make old
// checkpoints resume on a different order. The unit tests pin golden values.
//
//   φ        = 0x9E3779B97F4A7C15
//   M(z)     = z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
//              z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31
//   H(x)     = M(x + φ)                          (all arithmetic mod 2^64)
//   key      = H(H(H(D_shuffle) ^ seed) ^ epoch)  D_shuffle = "ACC-SHUF"
//   u_i      = M(key + i·φ), i = 1, 2, …          (SplitMix64 seeded with key)
//   below(b) = Lemire's method: m = u·b as a 128-bit product; while the low
//              64 bits of m are below (2^64 - b) mod b, draw again; return
//              the high 64 bits of m
//   a        = [0, 1, …, n-1]; for i = n-1 down to 1: swap(a[i], a[below(i+1)])
#pragma once

#include <cstdint>
#include <vector>

namespace accelerate {

/// SplitMix64 (Steele, Lea and Flood, 2014; the generator of Java's
/// SplittableRandom and of Vigna's splitmix64.c), written out so that its
/// output never depends on a library version. All of it is constexpr.
class SplitMix64 {
 public:
  /// φ, the increment of the state (2^64 divided by the golden ratio, odd).
  static constexpr std::uint64_t kIncrement = 0x9E3779B97F4A7C15ULL;

  constexpr explicit SplitMix64(std::uint64_t state) noexcept : state_(state) {}

  /// The output function M, a bijection of 64-bit words with full avalanche.
  [[nodiscard]] static constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  /// H(x) = M(x + φ): the first output of a generator seeded with x. Used to
  /// hash seeds, epochs and ranks into keys.
  [[nodiscard]] static constexpr std::uint64_t hash(std::uint64_t x) noexcept { return mix(x + kIncrement); }

  /// The next output: u_i = M(state + i·φ) for the i-th call.
  constexpr std::uint64_t next() noexcept {
    state_ += kIncrement;
    return mix(state_);
  }

  /// A uniform integer in [0, bound), by Lemire's multiply-and-reject method
  /// ("Fast random integer generation in an interval", 2019). Exactly uniform;
  /// it usually takes one output, and more only when it rejects. A bound of 0
  /// returns 0 without drawing.
  constexpr std::uint64_t below(std::uint64_t bound) noexcept {
    if (bound == 0) return 0;
    std::uint64_t high = 0;
    std::uint64_t low = 0;
    multiply(next(), bound, high, low);
    if (low < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;  // (2^64 - bound) mod bound
      while (low < threshold) multiply(next(), bound, high, low);
    }
    return high;
  }

  [[nodiscard]] constexpr std::uint64_t state() const noexcept { return state_; }

  /// The 128-bit product a·b as (high, low) 64-bit halves, portably.
  static constexpr void multiply(std::uint64_t a, std::uint64_t b, std::uint64_t& high, std::uint64_t& low) noexcept {
    constexpr std::uint64_t mask = 0xFFFFFFFFULL;
    const std::uint64_t a0 = a & mask;
    const std::uint64_t a1 = a >> 32;
    const std::uint64_t b0 = b & mask;
    const std::uint64_t b1 = b >> 32;
    const std::uint64_t p00 = a0 * b0;
    const std::uint64_t p01 = a0 * b1;
    const std::uint64_t p10 = a1 * b0;
    const std::uint64_t p11 = a1 * b1;
    const std::uint64_t middle = (p00 >> 32) + (p01 & mask) + (p10 & mask);
    low = (middle << 32) | (p00 & mask);
    high = p11 + (p01 >> 32) + (p10 >> 32) + (middle >> 32);
  }

 private:
  std::uint64_t state_;
};

/// Domain tags, so that the shuffle and the worker seeds never share a key
/// for the same (seed, epoch): the ASCII bytes "ACC-SHUF" and "ACC-WORK".
inline constexpr std::uint64_t kShuffleDomain = 0x4143432D53485546ULL;
inline constexpr std::uint64_t kWorkerDomain = 0x4143432D574F524BULL;

/// The key of an epoch's shuffle: H(H(H(kShuffleDomain) ^ seed) ^ epoch),
/// the epoch taken as a 64-bit two's-complement word. Unlike Accelerate's
/// `seed + epoch`, (seed, epoch + 1) and (seed + 1, epoch) give unrelated
/// orders.
[[nodiscard]] constexpr std::uint64_t shuffle_key(std::uint64_t seed, std::int64_t epoch) noexcept {
  using H = SplitMix64;
  return H::hash(H::hash(H::hash(kShuffleDomain) ^ seed) ^ static_cast<std::uint64_t>(epoch));
}

/// The seed of one data-loading worker thread:
///   H(H(H(H(H(kWorkerDomain) ^ seed) ^ epoch) ^ rank) ^ worker),
/// each integer taken as a 64-bit two's-complement word. Every input changes
/// all 64 bits (full avalanche), so workers of different ranks, and the same
/// worker in different epochs, draw unrelated streams (torch's default,
/// base_seed + worker_id, makes neighbouring seeds of neighbouring workers).
/// Seed the worker's own generators with it, e.g. torch::Generator or
/// std::mt19937_64; where 32 bits are wanted, any 32 of them will do.
/// Pass the data seed (not a per-rank seed): rank is mixed in here.
[[nodiscard]] constexpr std::uint64_t worker_seed(std::uint64_t seed, std::int64_t epoch, int rank,
                                                  int worker) noexcept {
  using H = SplitMix64;
  std::uint64_t h = H::hash(H::hash(kWorkerDomain) ^ seed);
  h = H::hash(h ^ static_cast<std::uint64_t>(epoch));
  h = H::hash(h ^ static_cast<std::uint64_t>(static_cast<std::int64_t>(rank)));
  return H::hash(h ^ static_cast<std::uint64_t>(static_cast<std::int64_t>(worker)));
}

/// The sample order of one epoch: a permutation of 0 … dataset_size-1, by
/// the Fisher–Yates shuffle of shuffle format 1 (see the top of this file).
/// O(dataset_size) time and memory. Throws ConfigError for a negative
/// dataset size or epoch.
[[nodiscard]] std::vector<std::int64_t> seeded_permutation(std::int64_t dataset_size, std::uint64_t seed,
                                                           std::int64_t epoch);

/// A random sampler whose order depends only on (seed, epoch, dataset size):
/// the C++ counterpart of Accelerate's SeedableRandomSampler. All ranks build
/// it with the same seed (the data seed) and call set_epoch with the same
/// epoch, and then hold the same order, which BatchSamplerShard divides:
///
///   SeedableRandomSampler sampler(dataset.size(), data_seed);
///   for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
///     sampler.set_epoch(epoch);
///     BatchSamplerShard shard(sampler.indices(), batch_size, drop_last, options);
///     for (const auto& batch : shard) { ... }
///   }
///
/// Differences from Accelerate: the order does not come from torch's
/// generator (whose algorithm may change between versions), the epoch does
/// not advance by itself at the end of an iteration (set it explicitly; a
/// resumed run states its epoch), and sampling with replacement and
/// num_samples are not offered.
class SeedableRandomSampler {
 public:
  using const_iterator = std::vector<std::int64_t>::const_iterator;

  /// Throws ConfigError for a negative dataset size or epoch.
  SeedableRandomSampler(std::int64_t dataset_size, std::uint64_t seed, std::int64_t epoch = 0);

  /// Recomputes the order for `epoch` (O(dataset size)); a no-op for the
  /// current epoch. Throws ConfigError for a negative epoch.
  void set_epoch(std::int64_t epoch);

  /// The current epoch's order: seeded_permutation(size(), seed(), epoch()).
  [[nodiscard]] const std::vector<std::int64_t>& indices() const noexcept { return order_; }
  [[nodiscard]] const_iterator begin() const noexcept { return order_.begin(); }
  [[nodiscard]] const_iterator end() const noexcept { return order_.end(); }

  [[nodiscard]] std::int64_t size() const noexcept { return static_cast<std::int64_t>(order_.size()); }
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }
  [[nodiscard]] std::int64_t epoch() const noexcept { return epoch_; }

 private:
  std::uint64_t seed_;
  std::int64_t epoch_;
  std::vector<std::int64_t> order_;
};

}  // namespace accelerate
