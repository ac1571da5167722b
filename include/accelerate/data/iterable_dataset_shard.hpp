// Sharding a stream of samples across processes (seeds: IterableDatasetShard).
// Pure C++: no MPI, no LibTorch. The semantics, with examples, are in
// docs/data-loading.md.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "accelerate/data/batch_sampler_shard.hpp"

namespace accelerate {

/// How a stream of samples is divided among processes.
struct IterableDatasetShardOptions {
  /// Without split_batches: the batch size of each process. With it: the
  /// batch size of all processes together (a multiple of num_processes).
  std::int64_t batch_size = 1;
  /// true: a last round that the stream cannot fill is dropped. false: it is
  /// completed with samples from the start of the stream.
  bool drop_last = false;
  int num_processes = 1;  ///< world size (State::num_processes())
  int process_index = 0;  ///< this process (State::process_index())
  bool split_batches = false;
};

/// This process's samples of a stream (an iterable dataset) of T.
///
/// The shard reads the stream in rounds of total_batch_size() samples
/// (batch_size * num_processes, or batch_size with split_batches) and yields
/// the process_batch_size() samples of each round that belong to this
/// process: the slice starting at process_index * process_batch_size(). So
/// every process yields the same number of samples, a multiple of
/// process_batch_size(). A round the stream cannot fill is dropped with
/// drop_last; otherwise it is completed cyclically from the first round.
///
/// One object is one pass over the stream (one epoch). It reads the source
/// lazily, one round at a time, and never calls it again once it has
/// reported the end. It keeps a copy of the first round (up to
/// total_batch_size() samples) to complete the last one.
///
///   IterableDatasetShard<Sample> shard(read_next, {.batch_size = 8,
///       .num_processes = state.num_processes(), .process_index = state.process_index()});
///   for (const Sample& sample : shard) { ... }
template <std::copy_constructible T>
class IterableDatasetShard {
 public:
  using value_type = T;
  /// Returns the next sample of the stream, or std::nullopt at its end.
  using Source = std::function<std::optional<T>()>;
  class iterator;

  /// Throws ConfigError for a batch size below 1, a process index outside the
  /// world, or split_batches with a batch size that is not a multiple of
  /// num_processes (Accelerate lets a batch size of 1 through, which leaves
  /// every process without samples; here it is an error too).
  IterableDatasetShard(Source source, const IterableDatasetShardOptions& options)
      : source_(std::move(source)), options_(options) {
    detail::check_shard_arguments("IterableDatasetShard", options.batch_size, options.num_processes,
                                  options.process_index, options.split_batches);
    process_batch_ = options.split_batches ? options.batch_size / options.num_processes : options.batch_size;
    round_ = options.split_batches ? options.batch_size : options.batch_size * options.num_processes;
    slice_begin_ = options.process_index * process_batch_;
  }

  /// Shards the samples of [first, last); the range must outlive the shard.
  template <std::input_iterator It, std::sentinel_for<It> S>
  requires std::copy_constructible<It> && std::copy_constructible<S> &&
      std::constructible_from<T, std::iter_reference_t<It>>
      IterableDatasetShard(It first, S last, const IterableDatasetShardOptions& options)
      : IterableDatasetShard(
            [first = std::move(first), last = std::move(last)]() mutable -> std::optional<T> {
              if (first == last) return std::nullopt;
              std::optional<T> sample(std::in_place, *first);
              ++first;
              return sample;
            },
            options) {}

  IterableDatasetShard(IterableDatasetShard&&) = default;
  IterableDatasetShard& operator=(IterableDatasetShard&&) = default;
  IterableDatasetShard(const IterableDatasetShard&) = delete;
  IterableDatasetShard& operator=(const IterableDatasetShard&) = delete;

  /// This process's next sample, or std::nullopt at the end of its share.
  std::optional<T> next() {
    if (cursor_ == slice_.size() && !fill_slice()) return std::nullopt;
    return std::move(slice_[cursor_++]);
  }

  /// This process's next batch: process_batch_size() samples (the rest of the
  /// current one if next() already took some), or std::nullopt at the end.
  std::optional<std::vector<T>> next_batch() {
    if (cursor_ == slice_.size() && !fill_slice()) return std::nullopt;
    std::vector<T> batch(std::make_move_iterator(slice_.begin() + static_cast<std::ptrdiff_t>(cursor_)),
                         std::make_move_iterator(slice_.end()));
    cursor_ = slice_.size();
    return batch;
  }

  /// Single-pass iteration over next(); the shard must outlive the iterator.
  iterator begin() { return iterator(this); }
  std::default_sentinel_t end() const noexcept { return {}; }

  /// Samples per process per round.
  [[nodiscard]] std::int64_t process_batch_size() const noexcept { return process_batch_; }
  /// Samples per round, all processes together.
  [[nodiscard]] std::int64_t total_batch_size() const noexcept { return round_; }
  /// How many samples this process yields from a stream of `stream_size`
  /// samples: whole rounds only with drop_last, otherwise the last partial
  /// round counts as a whole one.
  [[nodiscard]] std::int64_t expected_samples(std::int64_t stream_size) const noexcept {
    const std::int64_t rounds = options_.drop_last ? stream_size / round_ : (stream_size + round_ - 1) / round_;
    return rounds * process_batch_;
  }
  [[nodiscard]] const IterableDatasetShardOptions& options() const noexcept { return options_; }

 private:
  // Reads one round from the source and keeps this process's slice of it.
  bool fill_slice() {
    slice_.clear();
    cursor_ = 0;
    if (finished_) return false;
    const std::int64_t slice_end = slice_begin_ + process_batch_;
    const bool first_round = !first_round_read_;
    std::int64_t read = 0;
    while (read < round_) {
      std::optional<T> sample = source_();
      if (!sample) break;
      if (first_round) {
        first_.push_back(std::move(*sample));
      } else if (read >= slice_begin_ && read < slice_end) {
        slice_.push_back(std::move(*sample));
      }
      ++read;
    }
    if (read == round_) {
      if (first_round) {
        first_round_read_ = true;
        slice_.assign(first_.begin() + slice_begin_, first_.begin() + slice_end);
        if (options_.drop_last) first_ = {};  // only needed to complete a last round
      }
      return true;
    }
    finished_ = true;
    if (read == 0 || options_.drop_last) {
      slice_.clear();
      return false;
    }
    // Complete the round: position p >= read takes first_[(p - read) % |first_|],
    // where first_ is the first full round, or this partial one when the
    // stream is shorter than a round.
    const auto cycle = static_cast<std::int64_t>(first_.size());
    if (first_round) {
      for (std::int64_t p = slice_begin_; p < slice_end; ++p) {
        slice_.push_back(first_[static_cast<std::size_t>(p < read ? p : (p - read) % cycle)]);
      }
    } else {
      for (std::int64_t p = std::max(slice_begin_, read); p < slice_end; ++p) {
        slice_.push_back(first_[static_cast<std::size_t>((p - read) % cycle)]);
      }
    }
    return true;
  }

  Source source_;
  IterableDatasetShardOptions options_;
  std::int64_t process_batch_ = 0;
  std::int64_t round_ = 0;
  std::int64_t slice_begin_ = 0;
  std::vector<T> first_;  // the first round, kept to complete the last one
  std::vector<T> slice_;  // this process's slice of the current round
  std::size_t cursor_ = 0;
  bool first_round_read_ = false;
  bool finished_ = false;
};

template <std::input_iterator It, std::sentinel_for<It> S>
IterableDatasetShard(It, S, const IterableDatasetShardOptions&) -> IterableDatasetShard<std::iter_value_t<It>>;

/// Input iterator over a shard's samples; compares equal to
/// std::default_sentinel once the shard is exhausted.
template <std::copy_constructible T>
class IterableDatasetShard<T>::iterator {
 public:
  using iterator_concept = std::input_iterator_tag;
  using iterator_category = std::input_iterator_tag;
  using value_type = T;
  using difference_type = std::ptrdiff_t;
  using reference = const T&;

  iterator() = default;
  explicit iterator(IterableDatasetShard* shard) : shard_(shard), current_(shard->next()) {}

  const T& operator*() const { return *current_; }
  const T* operator->() const { return &*current_; }
  iterator& operator++() {
    current_ = shard_->next();
    return *this;
  }
  void operator++(int) { ++*this; }
  friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept { return !it.current_; }

 private:
  IterableDatasetShard* shard_ = nullptr;
  std::optional<T> current_;
};

}  // namespace accelerate
