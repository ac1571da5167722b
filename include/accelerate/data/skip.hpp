// skip_first_batches (seeds: accelerate.skip_first_batches): resuming a data
// loader in the middle of an epoch. Semantics: docs/data-loading.md,
// "Exact resume".
#pragma once

#include <cstddef>
#include <cstdint>
#include <ranges>
#include <string_view>

#include "accelerate/data/batch_sampler_shard.hpp"
#include "accelerate/data/iterable_dataset_shard.hpp"

namespace accelerate {

/// This process's batches from batch n on: a random-access, sized view
/// (std::ranges::view) that refers to the shard and computes each batch when
/// it is read. (A class of its own rather than std::ranges::subrange, which
/// Clang 14 cannot instantiate with libstdc++ 12.)
class SkippedBatches : public std::ranges::view_base {
 public:
  using iterator = BatchSamplerShard::iterator;

  SkippedBatches() = default;
  SkippedBatches(iterator first, iterator last) noexcept : first_(first), last_(last) {}

  [[nodiscard]] iterator begin() const noexcept { return first_; }
  [[nodiscard]] iterator end() const noexcept { return last_; }
  [[nodiscard]] std::size_t size() const noexcept { return static_cast<std::size_t>(last_ - first_); }
  [[nodiscard]] bool empty() const noexcept { return first_ == last_; }
  /// Batch i of the view: batch first_batch() + i of the shard.
  [[nodiscard]] BatchSamplerShard::Batch operator[](std::ptrdiff_t i) const { return first_[i]; }
  /// The shard's index of the view's first batch: the number skipped.
  [[nodiscard]] std::int64_t first_batch() const noexcept { return first_.index(); }

 private:
  iterator first_;
  iterator last_;
};

/// The batches of `shard` after the first `n`, by index arithmetic: O(1), no
/// skipped batch is computed. Skipping all batches or more gives an empty
/// view. The shard must outlive the view (hence no overload for temporaries).
/// Throws ConfigError for a negative n.
[[nodiscard]] SkippedBatches skip_first_batches(const BatchSamplerShard& shard, std::int64_t n);
SkippedBatches skip_first_batches(const BatchSamplerShard&& shard, std::int64_t n) = delete;

namespace detail {
/// Throws ConfigError naming `component` when n is negative.
void check_skip_count(std::string_view component, std::int64_t n);
}  // namespace detail

/// Skips the next `n` batches of a stream shard and returns the shard, so
/// that `for (const T& sample : skip_first_batches(shard, n))` continues at
/// batch n. A stream cannot be indexed: this reads and discards n rounds of
/// the source (n × total_batch_size() samples, on every rank), at the cost of
/// loading them, but without handing them to the caller. Call it on a fresh
/// shard: it skips from the shard's current position, and a batch already
/// partly read by next() counts as one. When the stream ends first, the
/// shard is left exhausted. Throws ConfigError for a negative n.
template <std::copy_constructible T>
IterableDatasetShard<T>& skip_first_batches(IterableDatasetShard<T>& shard, std::int64_t n) {
  detail::check_skip_count("skip_first_batches(IterableDatasetShard)", n);
  for (std::int64_t skipped = 0; skipped < n; ++skipped) {
    if (!shard.next_batch()) break;
  }
  return shard;
}

}  // namespace accelerate
