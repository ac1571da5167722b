#include "accelerate/data/batch_sampler_shard.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "accelerate/error.hpp"

// The arithmetic model (docs/data-loading.md, "Sharding semantics"):
//
// A round is what all processes consume together: round_ samples, of which
// process r takes the process_batch_ samples starting at r * process_batch_.
// Round j of process r therefore starts at stream position
// j * round_ + r * process_batch_. The stream is the sample order followed,
// when even batches must be completed, by the first min(n, round_) samples
// repeated cyclically. This is exactly what Accelerate's loops produce: its
// `initial_data` is the first round (or the whole epoch when shorter), doubled
// until long enough, and consumed from its start.

namespace accelerate {
namespace {

using std::int64_t;

[[noreturn]] void sampler_error(std::string_view component, const std::string& what) {
  throw ConfigError(std::string(component) + ": " + what);
}

}  // namespace

namespace detail {

void check_shard_arguments(std::string_view component, std::optional<int64_t> batch_size, int num_processes,
                           int process_index, bool split_batches) {
  if (num_processes < 1) {
    sampler_error(component, "num_processes is " + std::to_string(num_processes) +
                                 ", but at least one process must take part. Pass the world size "
                                 "(State::num_processes()).");
  }
  if (process_index < 0 || process_index >= num_processes) {
    sampler_error(component, "process_index is " + std::to_string(process_index) + ", but a world of " +
                                 std::to_string(num_processes) + " process" + (num_processes == 1 ? "" : "es") +
                                 " has indices 0.." + std::to_string(num_processes - 1) +
                                 ". Pass this process's rank (State::process_index()).");
  }
  if (!batch_size) return;
  const int64_t size = *batch_size;
  if (size < 1) {
    sampler_error(component,
                  "the batch size is " + std::to_string(size) +
                      ", but a batch needs at least one sample. Give the data loader a batch size of 1 or more.");
  }
  if (split_batches && size % num_processes != 0) {
    const int64_t lower = size / num_processes * num_processes;
    const int64_t upper = lower + num_processes;
    std::string sizes = lower > 0 ? std::to_string(lower) + " or " + std::to_string(upper) : std::to_string(upper);
    sampler_error(component, "split_batches cuts every batch into " + std::to_string(num_processes) +
                                 " equal slices, one per process, so the batch size must be a multiple of " +
                                 std::to_string(num_processes) + ", but it is " + std::to_string(size) +
                                 ". Use a batch size of " + sizes +
                                 ", or set split_batches to false so that every process "
                                 "draws whole batches of " +
                                 std::to_string(size) + ".");
  }
}

}  // namespace detail

BatchSamplerShard::BatchSamplerShard(std::vector<int64_t> order, int64_t batch_size, bool drop_last,
                                     const BatchSamplerShardOptions& options)
    : order_(std::move(order)),
      samples_(static_cast<int64_t>(order_.size())),
      batch_size_(batch_size),
      drop_last_(drop_last),
      options_(options) {
  detail::check_shard_arguments("BatchSamplerShard", batch_size, options.num_processes, options.process_index,
                                options.split_batches);
  finish_setup();
}

BatchSamplerShard BatchSamplerShard::sequential(int64_t dataset_size, int64_t batch_size, bool drop_last,
                                                const BatchSamplerShardOptions& options) {
  if (dataset_size < 0) {
    sampler_error("BatchSamplerShard::sequential", "the dataset size is " + std::to_string(dataset_size) +
                                                       "; it cannot be negative. Pass the number of samples.");
  }
  detail::check_shard_arguments("BatchSamplerShard", batch_size, options.num_processes, options.process_index,
                                options.split_batches);
  BatchSamplerShard shard;
  shard.sequential_ = true;
  shard.samples_ = dataset_size;
  shard.batch_size_ = batch_size;
  shard.drop_last_ = drop_last;
  shard.options_ = options;
  shard.finish_setup();
  return shard;
}

BatchSamplerShard BatchSamplerShard::from_batches(const std::vector<Batch>& batches, std::optional<int64_t> batch_size,
                                                  bool drop_last, const BatchSamplerShardOptions& options) {
  constexpr std::string_view component = "BatchSamplerShard::from_batches";
  detail::check_shard_arguments(component, batch_size, options.num_processes, options.process_index,
                                options.split_batches);
  if (!batch_size) {
    if (options.split_batches) {
      sampler_error(component,
                    "split_batches cuts every batch into equal slices and needs a fixed batch size, but none "
                    "was given (varying batches). Pass the batch size, or set split_batches to false.");
    }
    if (options.even_batches) {
      sampler_error(component,
                    "even_batches completes the last round with batches of the batch size, but the batches "
                    "vary in size (no batch size was given). Set even_batches to false "
                    "(DataLoaderConfiguration::even_batches), or pass the batch size.");
    }
  }
  const int64_t count = static_cast<int64_t>(batches.size());
  for (int64_t k = 0; k < count; ++k) {
    const auto size = static_cast<int64_t>(batches[static_cast<std::size_t>(k)].size());
    const std::string name = "batch " + std::to_string(k) + " of " + std::to_string(count);
    if (size == 0) {
      sampler_error(component, name +
                                   " is empty. A batch sampler yields batches of at least one sample; remove the "
                                   "empty batch.");
    }
    if (!batch_size) continue;
    if (size > *batch_size || (size < *batch_size && k + 1 < count)) {
      sampler_error(component, name + " has " + std::to_string(size) + (size == 1 ? " sample" : " samples") +
                                   ", but the batch size is " + std::to_string(*batch_size) +
                                   "; every batch but the last must be full, and none larger. Pass std::nullopt as the "
                                   "batch size to shard batches of varying size (with even_batches false).");
    }
    if (size < *batch_size && drop_last) {
      sampler_error(component,
                    "the last batch has " + std::to_string(size) + " of " + std::to_string(*batch_size) +
                        " samples, but drop_last is true, and a batch sampler that drops its last batch never "
                        "yields a short one. Pass drop_last = false, or remove the short batch.");
    }
  }

  BatchSamplerShard shard;
  shard.drop_last_ = drop_last;
  shard.options_ = options;
  shard.batch_size_ = batch_size.value_or(0);
  if (!batch_size) shard.offsets_.push_back(0);
  for (const Batch& batch : batches) {
    shard.order_.insert(shard.order_.end(), batch.begin(), batch.end());
    if (!batch_size) shard.offsets_.push_back(static_cast<int64_t>(shard.order_.size()));
  }
  shard.samples_ = static_cast<int64_t>(shard.order_.size());
  shard.finish_setup();
  return shard;
}

void BatchSamplerShard::finish_setup() {
  const int64_t processes = options_.num_processes;
  const int64_t rank = options_.process_index;
  if (batch_size_ == 0) {
    // Varying batches: whole batches in turn; drop_last drops an incomplete round.
    total_length_ = static_cast<int64_t>(offsets_.size()) - 1;
    const int64_t dealt = drop_last_ ? total_length_ / processes * processes : total_length_;
    size_ = dealt > rank ? (dealt - rank + processes - 1) / processes : 0;
    return;
  }
  process_batch_ = options_.split_batches ? batch_size_ / processes : batch_size_;
  round_ = options_.split_batches ? batch_size_ : batch_size_ * processes;
  total_length_ = drop_last_ ? samples_ / batch_size_ : (samples_ + batch_size_ - 1) / batch_size_;

  const int64_t full_rounds = samples_ / round_;
  const int64_t remainder = samples_ % round_;
  if (drop_last_) {
    size_ = full_rounds;  // the first short round ends the epoch, on every process
  } else if (options_.even_batches) {
    size_ = full_rounds + (remainder > 0 ? 1 : 0);
  } else {
    size_ = full_rounds + (remainder > rank * process_batch_ ? 1 : 0);
  }
}

std::optional<int64_t> BatchSamplerShard::batch_size() const noexcept {
  if (batch_size_ == 0) return std::nullopt;
  return batch_size_;
}

int64_t BatchSamplerShard::sample_at(int64_t position) const {
  if (position >= samples_) position = (position - samples_) % std::min(samples_, round_);
  return sequential_ ? position : order_[static_cast<std::size_t>(position)];
}

BatchSamplerShard::Batch BatchSamplerShard::batch(int64_t i) const {
  if (i < 0 || i >= size_) {
    sampler_error("BatchSamplerShard::batch",
                  "there is no batch " + std::to_string(i) + "; process " + std::to_string(options_.process_index) +
                      " has " + std::to_string(size_) + " batch" + (size_ == 1 ? "" : "es") +
                      (size_ > 0 ? ", numbered 0.." + std::to_string(size_ - 1) : "") + ". Stay below size().");
  }
  Batch result;
  if (batch_size_ == 0) {
    const auto k = static_cast<std::size_t>(i * options_.num_processes + options_.process_index);
    result.assign(order_.begin() + offsets_[k], order_.begin() + offsets_[k + 1]);
    return result;
  }
  const int64_t start = i * round_ + options_.process_index * process_batch_;
  int64_t length = process_batch_;
  if (!options_.even_batches && !drop_last_) length = std::min(length, samples_ - start);
  result.reserve(static_cast<std::size_t>(length));
  for (int64_t k = 0; k < length; ++k) result.push_back(sample_at(start + k));
  return result;
}

std::vector<BatchSamplerShard::Batch> BatchSamplerShard::batches() const {
  std::vector<Batch> result;
  result.reserve(static_cast<std::size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) result.push_back(batch(i));
  return result;
}

}  // namespace accelerate
