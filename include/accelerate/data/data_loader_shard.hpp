// DataLoaderShard (seeds: accelerate.data_loader.DataLoaderShard): this
// process's batches of a map-style LibTorch dataset, collated and placed on
// the State's device, with exact resume through LoaderState.
// Semantics and examples: docs/data-loading.md, "Loaders".
//
//   accelerate::DataLoaderShard loader(MyDataset(...), state,
//       {.batch_size = 32, .shuffle = true, .num_workers = 4},
//       {.data_seed = 1234});
//   for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
//     loader.set_epoch(epoch);
//     for (const torch::data::Example<>& batch : loader) {
//       ... // batch.data, batch.target: stacked, on state.device()
//       if (loader.end_of_dataloader()) { ... }  // known before the last step
//     }
//   }
//
// Samples may be any structure DefaultCollate batches (tensors, Example<>,
// maps, tuples, IValue dicts), or anything a collate function given to the
// loader turns into a batch. The order of an epoch comes from shuffle, a
// sampler or a batch sampler (DataLoaderOptions).
//
// Header-only: the loader is a template over the dataset and collate types.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "accelerate/data/batch_pipeline.hpp"
#include "accelerate/data/batch_sampler_shard.hpp"
#include "accelerate/data/collate.hpp"
#include "accelerate/data/custom_samplers.hpp"
#include "accelerate/data/data_loader.hpp"
#include "accelerate/data/data_loader_configuration.hpp"
#include "accelerate/data/data_loader_options.hpp"
#include "accelerate/data/data_seed.hpp"
#include "accelerate/data/loader_state.hpp"
#include "accelerate/data/seedable_sampler.hpp"
#include "accelerate/data/skip.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/runtime/torch_device.hpp"

namespace accelerate {

/// A map-style dataset: get(i) returns the sample i, size() its length as
/// an optional (std::optional or LibTorch's c10::optional; empty when
/// unknown, which a DataLoaderShard rejects). Every
/// torch::data::datasets::Dataset<Self, Sample> qualifies. With worker
/// threads, get() is called concurrently from several threads on one dataset
/// object, as in LibTorch's own DataLoader: it must be safe to do so.
template <class D>
concept MapStyleDataset = requires(D& dataset, const D& const_dataset, std::size_t index) {
  requires std::movable<std::remove_cvref_t<decltype(dataset.get(index))>>;
  {static_cast<bool>(const_dataset.size())};
  { *const_dataset.size() } -> std::convertible_to<std::size_t>;
};

/// The sample type of a map-style dataset.
template <MapStyleDataset D>
using SampleOf = std::remove_cvref_t<decltype(std::declval<D&>().get(std::size_t{}))>;

/// A map-style dataset of data/target examples (torch::data::Example<>),
/// the samples the dispatcher scatters. Checking it needs LibTorch's
/// definition of Example (<torch/data/example.h>; data/example_fwd.hpp).
template <class D>
concept ExampleDataset = MapStyleDataset<D> && std::convertible_to<SampleOf<D>, detail::TensorExample>;

/// A collate function for the samples of `D`: a callable from
/// std::vector<sample> to a batch.
template <class Collate, class D>
concept CollateFor = MapStyleDataset<D> && std::invocable<const Collate&, std::vector<SampleOf<D>>> &&
    std::movable<std::remove_cvref_t<std::invoke_result_t<const Collate&, std::vector<SampleOf<D>>>>>;

/// The batch type a loader of `D` with `Collate` hands out.
template <MapStyleDataset D, CollateFor<D> Collate>
using CollatedBatch = std::remove_cvref_t<std::invoke_result_t<const Collate&, std::vector<SampleOf<D>>>>;

/// This process's batches of a map-style dataset.
///
/// Each pass (begin() … end()) iterates the BatchSamplerShard of the
/// epoch's order (the sampler's, seeded_permutation(n, seed, epoch) with
/// shuffle, else 0 … n-1; or the batch sampler's batches), collates each
/// batch's samples and moves the batch to the device. After a complete pass
/// the next begin() moves to the next epoch; set_epoch chooses one.
/// One pass at a time: begin() abandons the previous pass and its iterators.
template <MapStyleDataset Dataset, CollateFor<Dataset> Collate = DefaultCollate>
class DataLoaderShard final : public BasicDataLoader<CollatedBatch<Dataset, Collate>> {
  using Base = BasicDataLoader<CollatedBatch<Dataset, Collate>>;
  using Sample = SampleOf<Dataset>;
  using Base::attach_state;
  using Base::begin_position;
  using Base::finish_pass;
  using Base::hand_out;
  using Base::position_;

 public:
  using Batch = typename Base::Batch;

  /// Collective over state.world_comm() when the seed must be drawn (shuffle
  /// with a seedable sampler, no data_seed, and no set_seed before): rank 0
  /// draws it and broadcasts it. Throws ConfigError for an unknown dataset size, a batch
  /// size below 1, bad worker options, or options this loader does not offer.
  DataLoaderShard(Dataset dataset, const State& state, DataLoaderOptions options = {},
                  DataLoaderConfiguration config = {}, Collate collate_fn = {})
      : DataLoaderShard(std::move(dataset),
                        DataLoaderPlacement{state.num_processes(), state.process_index(), state.device()},
                        std::move(options), config, std::move(collate_fn), &state) {}

  /// Without a State: no communication. A seeded order (shuffle, a sampler)
  /// then needs a data_seed, unless num_processes is 1.
  DataLoaderShard(Dataset dataset, const DataLoaderPlacement& placement, DataLoaderOptions options = {},
                  DataLoaderConfiguration config = {}, Collate collate_fn = {})
      : DataLoaderShard(std::move(dataset), placement, std::move(options), config, std::move(collate_fn), nullptr) {}

  DataLoaderShard(const DataLoaderShard&) = delete;
  DataLoaderShard& operator=(const DataLoaderShard&) = delete;
  DataLoaderShard(DataLoaderShard&&) = default;
  DataLoaderShard& operator=(DataLoaderShard&&) = default;
  ~DataLoaderShard() override = default;

  [[nodiscard]] bool drops_last_batch() const noexcept override { return options_.drop_last; }
  /// Real samples in the last global batch, for gather_for_metrics:
  /// total_dataset_length() % total_batch_size() (0: the last batch is full);
  /// -1 with drop_last, as in Accelerate.
  [[nodiscard]] std::int64_t remainder() const noexcept override {
    return options_.drop_last ? -1 : samples_ % this->total_batch_size();
  }
  /// Batches this process yields in a whole epoch.
  [[nodiscard]] std::int64_t size() const noexcept { return batches_; }
  /// Samples in an epoch: the dataset's size, or the sampler's length.
  [[nodiscard]] std::int64_t total_dataset_length() const noexcept override { return samples_; }
  [[nodiscard]] std::int64_t batch_size() const noexcept { return options_.batch_size; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return position_.seed; }
  [[nodiscard]] const DataLoaderOptions& options() const noexcept { return options_; }
  [[nodiscard]] const DataLoaderConfiguration& configuration() const noexcept { return config_; }
  [[nodiscard]] const c10::Device& device() const noexcept { return device_; }
  [[nodiscard]] Dataset& dataset() noexcept { return *dataset_; }

 private:
  const Batch* start_pass() override;
  void drop_pass() override { pass_.reset(); }
  [[nodiscard]] BatchSamplerShardOptions shard_options() const override { return sharding_; }
  [[nodiscard]] std::int64_t batches_per_epoch() const noexcept override { return rounds_; }
  const Batch* next_batch() override {
    step();
    return current();
  }
  [[nodiscard]] const Batch* current() const noexcept { return pass_ && pass_->current ? &*pass_->current : nullptr; }

  struct Pass {
    BatchSamplerShard shard;
    std::unique_ptr<detail::BatchPipeline<Batch>> pipeline;  // after shard: refers to it
    std::optional<Batch> current;
    std::int64_t current_index = -1;  // shard index of current
  };

  DataLoaderShard(Dataset dataset, const DataLoaderPlacement& placement, DataLoaderOptions options,
                  DataLoaderConfiguration config, Collate collate_fn, const State* state)
      : options_(std::move(options)),
        config_(config),
        device_(torch_device(placement.device)),
        collate_(std::make_shared<const Collate>(std::move(collate_fn))) {
    constexpr std::string_view component = "DataLoaderShard";
    const auto length = std::as_const(dataset).size();
    if (!length) {
      detail::loader_error(component,
                           "the dataset's size() is unknown (std::nullopt), but a map-style loader shards sample "
                           "indices 0 ... n-1 and needs n. Give the dataset a size(), or read it as a stream with "
                           "IterableDatasetShard.");
    }
    if (options_.batch_size < 1) {
      detail::loader_error(component, "the batch size is " + std::to_string(options_.batch_size) +
                                          ", but a batch needs at least one sample. Give the data loader a batch "
                                          "size of 1 or more.");
    }
    if (options_.num_workers < 0) {
      detail::loader_error(component, "num_workers is " + std::to_string(options_.num_workers) +
                                          "; use 0 to load on the calling thread, or a positive number of threads.");
    }
    if (options_.num_workers > 0 && options_.prefetch_factor < 1) {
      detail::loader_error(component, "prefetch_factor is " + std::to_string(options_.prefetch_factor) +
                                          ", but each of the " + std::to_string(options_.num_workers) +
                                          " workers must be allowed at least one batch ahead. Use 1 or more.");
    }
    if (config_.dispatch_batches.value_or(false)) {
      detail::loader_error(component,
                           "dispatch_batches = true asks for the main process to load and the others to receive, "
                           "which is DataLoaderDispatcher's job; a DataLoaderShard loads on every process. Build a "
                           "DataLoaderDispatcher, or leave dispatch_batches unset or false.");
    }
    if (options_.shuffle && !config_.use_seedable_sampler) {
      detail::loader_error(component,
                           "shuffle with use_seedable_sampler = false (LibTorch's generator, synchronised from rank "
                           "0) is not offered yet. Set use_seedable_sampler = true (the default), which also makes "
                           "exact resume possible.");
    }
    detail::check_samplers(component, options_);
    dataset_size_ = static_cast<std::int64_t>(*length);
    sharding_ = {.num_processes = placement.num_processes,
                 .process_index = placement.process_index,
                 .split_batches = config_.split_batches,
                 .even_batches = config_.even_batches};
    const bool seeded = options_.shuffle || options_.sampler || options_.batch_sampler;
    position_.seed = detail::choose_data_seed(config_, seeded, state, placement.num_processes, component);
    // The sizes of an epoch: the sampler's length, or the batch sampler's
    // batches, read from epoch 0; every later epoch must keep them.
    BatchSamplerShardOptions first = sharding_;
    first.process_index = 0;  // rank 0 has the most batches: one per round
    std::int64_t samples = dataset_size_;
    if (options_.batch_sampler) {
      const std::vector<BatchSamplerShard::Batch> batches = sampled_batches(0);
      sampled_batch_count_ = static_cast<std::int64_t>(batches.size());
      sampled_batch_size_ = detail::uniform_batch_size(batches);
      const auto mine = BatchSamplerShard::from_batches(batches, sampled_batch_size_, false, sharding_);
      rounds_ = BatchSamplerShard::from_batches(batches, sampled_batch_size_, false, first).size();
      batches_ = mine.size();
      std::int64_t largest = 0;
      samples = 0;
      for (const auto& batch : batches) {
        largest = std::max<std::int64_t>(largest, static_cast<std::int64_t>(batch.size()));
        samples += static_cast<std::int64_t>(batch.size());
      }
      // Batches of varying size: the position counts rounds of the largest
      // batch (resume is by batch index), and no round is padded.
      position_.global_batch_size = sampled_batch_size_ ? mine.total_batch_size() : largest * sharding_.num_processes;
      if (!sampled_batch_size_) samples = rounds_ * position_.global_batch_size;
    } else {
      if (options_.sampler) {
        sampled_length_ = static_cast<std::int64_t>(sampled_order(0).size());
        samples = sampled_length_;
      }
      // Validates the batch size against the world and the rank.
      const auto mine = BatchSamplerShard::sequential(samples, options_.batch_size, options_.drop_last, sharding_);
      rounds_ = BatchSamplerShard::sequential(samples, options_.batch_size, options_.drop_last, first).size();
      batches_ = mine.size();
      position_.global_batch_size = mine.total_batch_size();
    }
    samples_ = samples;
    position_.world_size = placement.num_processes;
    position_.dataset_size = samples_;
    attach_state(state, options_.rng_types, component);
    dataset_ = std::make_shared<Dataset>(std::move(dataset));
  }

  // The sampler's order for `epoch`, checked against the dataset and epoch 0.
  std::vector<std::int64_t> sampled_order(std::int64_t epoch) const {
    std::vector<std::int64_t> order = options_.sampler(epoch, position_.seed);
    detail::check_sampled_indices("sampler", epoch, order, dataset_size_);
    if (sampled_length_ >= 0 && static_cast<std::int64_t>(order.size()) != sampled_length_) {
      detail::check_same_epoch_size("sampler", epoch, "samples", static_cast<std::int64_t>(order.size()),
                                    sampled_length_);
    }
    return order;
  }

  // The batch sampler's batches for `epoch`, checked likewise.
  std::vector<BatchSamplerShard::Batch> sampled_batches(std::int64_t epoch) const {
    std::vector<BatchSamplerShard::Batch> batches = options_.batch_sampler(epoch, position_.seed);
    for (const auto& batch : batches) detail::check_sampled_indices("batch_sampler", epoch, batch, dataset_size_);
    if (sampled_batch_count_ >= 0 && static_cast<std::int64_t>(batches.size()) != sampled_batch_count_) {
      detail::check_same_epoch_size("batch_sampler", epoch, "batches", static_cast<std::int64_t>(batches.size()),
                                    sampled_batch_count_);
    }
    return batches;
  }

  BatchSamplerShard epoch_shard() const {
    const std::int64_t epoch = position_.epoch;
    if (options_.batch_sampler) {
      return BatchSamplerShard::from_batches(sampled_batches(epoch), sampled_batch_size_, false, sharding_);
    }
    if (options_.sampler) {
      return BatchSamplerShard(sampled_order(epoch), options_.batch_size, options_.drop_last, sharding_);
    }
    if (!options_.shuffle) {
      return BatchSamplerShard::sequential(dataset_size_, options_.batch_size, options_.drop_last, sharding_);
    }
    return BatchSamplerShard(seeded_permutation(dataset_size_, position_.seed, epoch), options_.batch_size,
                             options_.drop_last, sharding_);
  }

  // Makes the pipeline's next batch current, or ends the pass.
  void step() {
    if (!pass_ || !pass_->pipeline) return;  // the pass is over
    Pass& pass = *pass_;
    std::optional<Batch> batch = pass.pipeline->next();
    if (!batch) {
      pass.current.reset();
      pass.pipeline.reset();  // joins the workers
      finish_pass(rounds_);
      return;
    }
    ++pass.current_index;
    pass.current.emplace(detail::place_batch(std::move(*batch), device_, config_.non_blocking, options_.pin_memory));
    hand_out(pass.current_index, pass.current_index + 1 >= pass.shard.size(), rounds_);
  }

  DataLoaderOptions options_;
  DataLoaderConfiguration config_;
  c10::Device device_;
  BatchSamplerShardOptions sharding_;
  std::shared_ptr<const Collate> collate_;  // shared with the workers' load function
  std::shared_ptr<Dataset> dataset_;
  std::int64_t dataset_size_ = 0;
  std::int64_t samples_ = 0;                        // in an epoch
  std::int64_t sampled_length_ = -1;                // the sampler's, once known
  std::int64_t sampled_batch_count_ = -1;           // the batch sampler's, once known
  std::optional<std::int64_t> sampled_batch_size_;  // the batch sampler's, when uniform
  std::int64_t batches_ = 0;
  std::int64_t rounds_ = 0;
  std::unique_ptr<Pass> pass_;  // last: its workers go before the rest
};

template <MapStyleDataset Dataset, CollateFor<Dataset> Collate>
auto DataLoaderShard<Dataset, Collate>::start_pass() -> const Batch* {
  pass_.reset();  // joins the workers of an abandoned pass
  const std::int64_t start = begin_position();
  auto pass = std::make_unique<Pass>(Pass{epoch_shard(), nullptr, std::nullopt, start - 1});
  const BatchSamplerShard* shard = &pass->shard;
  const std::int64_t first = accelerate::skip_first_batches(pass->shard, start).first_batch();
  std::shared_ptr<Dataset> dataset = dataset_;
  std::shared_ptr<const Collate> collate = collate_;
  auto load = [dataset, collate, shard](std::int64_t index) -> Batch {
    std::vector<Sample> samples;
    const BatchSamplerShard::Batch indices = shard->batch(index);
    samples.reserve(indices.size());
    for (const std::int64_t sample : indices) samples.emplace_back(dataset->get(static_cast<std::size_t>(sample)));
    return std::invoke(*collate, std::move(samples));
  };
  const int workers = options_.num_workers;
  typename detail::BatchPipeline<Batch>::WorkerStart start_worker;
  if (workers > 0) {
    const std::uint64_t seed = position_.seed;
    const std::int64_t epoch = position_.epoch;
    const int rank = sharding_.process_index;
    auto init = options_.worker_init_fn;
    start_worker = [seed, epoch, rank, workers, init](int worker) {
      const std::uint64_t mine = worker_seed(seed, epoch, rank, worker);
      detail::worker_info_slot() = WorkerInfo{worker, workers, mine};
      if (init) init(worker, mine);
    };
  }
  pass->pipeline = std::make_unique<detail::BatchPipeline<Batch>>(std::move(load), std::min(first, pass->shard.size()),
                                                                  pass->shard.size(), workers, options_.prefetch_factor,
                                                                  std::move(start_worker));
  pass_ = std::move(pass);
  step();
  return current();
}

}  // namespace accelerate
