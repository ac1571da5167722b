// Index-level sharding of a batch sampler across processes (seeds:
// BatchSamplerShard; DataLoaderConfiguration's split_batches and
// even_batches). Pure arithmetic over sample indices: no MPI, no LibTorch.
// The semantics, with examples, are in docs/data-loading.md.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>
#include <vector>

namespace accelerate {

/// How a batch sampler is divided among processes.
struct BatchSamplerShardOptions {
  int num_processes = 1;  ///< world size (State::num_processes())
  int process_index = 0;  ///< this process (State::process_index())
  /// false: every process draws whole batches of the underlying sampler, in
  /// turn (process r gets batches r, r+n, r+2n, …).
  /// true: every batch is cut into num_processes equal slices, and process r
  /// gets slice r; the batch size must then be a multiple of num_processes.
  bool split_batches = false;
  /// true: when the samples do not fill a last round of batches, the round is
  /// completed with samples from the start of the epoch, so every process
  /// yields the same number of full batches. false: the last round stays
  /// short; some processes get one batch fewer, or a short batch.
  /// Ignored when the underlying sampler drops its last batch (drop_last).
  bool even_batches = true;
};

/// This process's batches of a batch sampler.
///
/// The underlying batch sampler cuts a sample order (0..n-1, or a shuffled
/// permutation) into batches of batch_size, keeping a short last batch unless
/// drop_last. The shard yields the batches (or batch slices) of one process.
/// Every batch is computed from its index, so size() and batch(i) cost O(1)
/// and O(batch size): skipping batches needs no iteration.
///
///   BatchSamplerShard shard(order, 4, /*drop_last=*/false,
///                           {.num_processes = 2, .process_index = rank});
///   for (const std::vector<int64_t>& indices : shard) { ... }
class BatchSamplerShard {
 public:
  using Batch = std::vector<std::int64_t>;
  class iterator;

  /// Shards BatchSampler(order, batch_size, drop_last). Throws ConfigError for
  /// a batch size below 1, a process index outside the world, or split_batches
  /// with a batch size that is not a multiple of num_processes.
  BatchSamplerShard(std::vector<std::int64_t> order, std::int64_t batch_size, bool drop_last,
                    const BatchSamplerShardOptions& options = {});

  /// As above over the order 0..dataset_size-1, without storing it.
  static BatchSamplerShard sequential(std::int64_t dataset_size, std::int64_t batch_size, bool drop_last,
                                      const BatchSamplerShardOptions& options = {});

  /// Shards the batches an underlying batch sampler produced.
  /// With a batch size, every batch but the last must hold exactly batch_size
  /// samples, and the last at least one (all of them when drop_last).
  /// Without one (std::nullopt), batches may vary in size; they are then dealt
  /// out whole and in turn, which requires even_batches and split_batches to
  /// be false, as in Accelerate.
  static BatchSamplerShard from_batches(const std::vector<Batch>& batches, std::optional<std::int64_t> batch_size,
                                        bool drop_last, const BatchSamplerShardOptions& options = {});

  /// The number of batches this process yields, computed without iterating.
  [[nodiscard]] std::int64_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

  /// This process's batch i, 0 <= i < size(). Throws ConfigError otherwise.
  [[nodiscard]] Batch batch(std::int64_t i) const;

  /// Every batch of this process, materialised.
  [[nodiscard]] std::vector<Batch> batches() const;

  /// Random-access iteration; begin() + k starts at batch k in O(1).
  [[nodiscard]] iterator begin() const noexcept;
  [[nodiscard]] iterator end() const noexcept;

  /// The number of batches of the underlying batch sampler (all processes).
  [[nodiscard]] std::int64_t total_length() const noexcept { return total_length_; }
  /// The underlying sampler's batch size; std::nullopt for varying batches.
  [[nodiscard]] std::optional<std::int64_t> batch_size() const noexcept;
  /// The size of this process's full batches: batch_size / num_processes with
  /// split_batches, batch_size otherwise (0 for varying batches).
  [[nodiscard]] std::int64_t process_batch_size() const noexcept { return process_batch_; }
  /// Samples consumed per round by all processes together: batch_size with
  /// split_batches, batch_size * num_processes otherwise (0 for varying).
  [[nodiscard]] std::int64_t total_batch_size() const noexcept { return round_; }
  /// The number of samples in the sample order.
  [[nodiscard]] std::int64_t dataset_size() const noexcept { return samples_; }
  [[nodiscard]] bool drop_last() const noexcept { return drop_last_; }
  [[nodiscard]] const BatchSamplerShardOptions& options() const noexcept { return options_; }

 private:
  BatchSamplerShard() = default;
  void finish_setup();
  [[nodiscard]] std::int64_t sample_at(std::int64_t position) const;

  std::vector<std::int64_t> order_;    // empty when sequential_
  std::vector<std::int64_t> offsets_;  // batch boundaries, varying batches only
  bool sequential_ = false;
  std::int64_t samples_ = 0;
  std::int64_t batch_size_ = 0;  // 0: varying batches
  bool drop_last_ = false;
  BatchSamplerShardOptions options_;
  std::int64_t process_batch_ = 0;
  std::int64_t round_ = 0;
  std::int64_t total_length_ = 0;
  std::int64_t size_ = 0;
};

/// Random-access iterator over a shard's batches; dereferencing computes the
/// batch (a prvalue), so it models std::random_access_iterator but is only a
/// legacy input iterator. The shard must outlive it.
class BatchSamplerShard::iterator {
 public:
  using iterator_concept = std::random_access_iterator_tag;
  using iterator_category = std::input_iterator_tag;
  using value_type = Batch;
  using difference_type = std::ptrdiff_t;
  using reference = Batch;

  iterator() = default;
  iterator(const BatchSamplerShard* shard, difference_type index) noexcept : shard_(shard), index_(index) {}

  reference operator*() const { return shard_->batch(index_); }
  reference operator[](difference_type n) const { return shard_->batch(index_ + n); }
  [[nodiscard]] difference_type index() const noexcept { return index_; }

  iterator& operator++() noexcept {
    ++index_;
    return *this;
  }
  iterator operator++(int) noexcept {
    iterator old = *this;
    ++index_;
    return old;
  }
  iterator& operator--() noexcept {
    --index_;
    return *this;
  }
  iterator operator--(int) noexcept {
    iterator old = *this;
    --index_;
    return old;
  }
  iterator& operator+=(difference_type n) noexcept {
    index_ += n;
    return *this;
  }
  iterator& operator-=(difference_type n) noexcept {
    index_ -= n;
    return *this;
  }
  friend iterator operator+(iterator it, difference_type n) noexcept { return it += n; }
  friend iterator operator+(difference_type n, iterator it) noexcept { return it += n; }
  friend iterator operator-(iterator it, difference_type n) noexcept { return it -= n; }
  friend difference_type operator-(const iterator& a, const iterator& b) noexcept { return a.index_ - b.index_; }
  friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.index_ == b.index_; }
  friend std::strong_ordering operator<=>(const iterator& a, const iterator& b) noexcept {
    return a.index_ <=> b.index_;
  }

 private:
  const BatchSamplerShard* shard_ = nullptr;
  difference_type index_ = 0;
};

inline BatchSamplerShard::iterator BatchSamplerShard::begin() const noexcept { return {this, 0}; }
inline BatchSamplerShard::iterator BatchSamplerShard::end() const noexcept {
  return {this, static_cast<std::ptrdiff_t>(size_)};
}

namespace detail {

/// Checks the arguments every shard takes and throws ConfigError naming
/// `component` (BatchSamplerShard, IterableDatasetShard) and the remedy.
/// A batch_size of std::nullopt (varying batches) skips the batch checks.
void check_shard_arguments(std::string_view component, std::optional<std::int64_t> batch_size, int num_processes,
                           int process_index, bool split_batches);

}  // namespace detail
}  // namespace accelerate
