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
// Header-only: the loader is a template over the dataset type.
#pragma once

#include <torch/types.h>
#include <torch/data/example.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "accelerate/data/batch_pipeline.hpp"
#include "accelerate/data/batch_sampler_shard.hpp"
#include "accelerate/data/collate.hpp"
#include "accelerate/data/data_loader.hpp"
#include "accelerate/data/data_loader_configuration.hpp"
#include "accelerate/data/data_loader_options.hpp"
#include "accelerate/data/data_seed.hpp"
#include "accelerate/data/loader_state.hpp"
#include "accelerate/data/seedable_sampler.hpp"
#include "accelerate/data/skip.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate {

/// A map-style dataset: get(i) returns the sample i as a torch::data::Example<>
/// (data and target tensors), size() its length as an optional (std::optional
/// or LibTorch's c10::optional; empty when unknown,
/// which a DataLoaderShard rejects). Every torch::data::datasets::Dataset<Self>
/// with the default example type qualifies. With worker threads, get() is
/// called concurrently from several threads on one dataset object, as in
/// LibTorch's own DataLoader: it must be safe to do so.
template <class D>
concept MapStyleDataset = requires(D& dataset, const D& const_dataset, std::size_t index) {
  { dataset.get(index) } -> std::convertible_to<torch::data::Example<>>;
  {static_cast<bool>(const_dataset.size())};
  { *const_dataset.size() } -> std::convertible_to<std::size_t>;
};

/// This process's batches of a map-style dataset.
///
/// Each pass (begin() … end()) iterates the BatchSamplerShard of the
/// epoch's order (seeded_permutation(n, seed, epoch) with shuffle, else
/// 0 … n-1), stacks each batch's examples into one Example and moves it to
/// the device. The epoch never advances by itself: call set_epoch.
/// One pass at a time: begin() abandons the previous pass and its iterators.
template <MapStyleDataset Dataset>
class DataLoaderShard final : public DataLoader {
 public:
  /// Collective over state.world_comm() when the seed must be drawn (shuffle
  /// with a seedable sampler, no data_seed, and no set_seed before): rank 0
  /// draws it and broadcasts it. Throws ConfigError for an unknown dataset size, a batch
  /// size below 1, bad worker options, or options this loader does not offer.
  DataLoaderShard(Dataset dataset, const State& state, DataLoaderOptions options = {},
                  DataLoaderConfiguration config = {})
      : DataLoaderShard(std::move(dataset),
                        DataLoaderPlacement{state.num_processes(), state.process_index(), state.device()},
                        std::move(options), config, &state) {}

  /// Without a State: no communication. Shuffling then needs a data_seed,
  /// unless num_processes is 1.
  DataLoaderShard(Dataset dataset, const DataLoaderPlacement& placement, DataLoaderOptions options = {},
                  DataLoaderConfiguration config = {})
      : DataLoaderShard(std::move(dataset), placement, std::move(options), config, nullptr) {}

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
    return options_.drop_last ? -1 : dataset_size_ % total_batch_size();
  }
  /// Batches this process yields in a whole epoch.
  [[nodiscard]] std::int64_t size() const noexcept { return batches_; }
  [[nodiscard]] std::int64_t total_dataset_length() const noexcept override { return dataset_size_; }
  [[nodiscard]] std::int64_t batch_size() const noexcept { return options_.batch_size; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return position_.seed; }
  [[nodiscard]] const DataLoaderOptions& options() const noexcept { return options_; }
  [[nodiscard]] const DataLoaderConfiguration& configuration() const noexcept { return config_; }
  [[nodiscard]] const torch::Device& device() const noexcept { return device_; }
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
                  DataLoaderConfiguration config, const State* state)
      : options_(std::move(options)), config_(config), device_(placement.device) {
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
    dataset_size_ = static_cast<std::int64_t>(*length);
    sharding_ = {.num_processes = placement.num_processes,
                 .process_index = placement.process_index,
                 .split_batches = config_.split_batches,
                 .even_batches = config_.even_batches};
    // Validates the batch size against the world and the rank.
    const auto mine = BatchSamplerShard::sequential(dataset_size_, options_.batch_size, options_.drop_last, sharding_);
    BatchSamplerShardOptions first = sharding_;
    first.process_index = 0;  // rank 0 has the most batches: one per round
    rounds_ = BatchSamplerShard::sequential(dataset_size_, options_.batch_size, options_.drop_last, first).size();
    batches_ = mine.size();
    position_.global_batch_size = mine.total_batch_size();
    position_.world_size = placement.num_processes;
    position_.dataset_size = dataset_size_;
    position_.seed = detail::choose_data_seed(config_, options_.shuffle, state, placement.num_processes, component);
    attach_state(state, options_.rng_types, component);
    dataset_ = std::make_shared<Dataset>(std::move(dataset));
  }

  BatchSamplerShard epoch_shard() const {
    if (!options_.shuffle) {
      return BatchSamplerShard::sequential(dataset_size_, options_.batch_size, options_.drop_last, sharding_);
    }
    return BatchSamplerShard(seeded_permutation(dataset_size_, position_.seed, position_.epoch), options_.batch_size,
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
  torch::Device device_;
  BatchSamplerShardOptions sharding_;
  std::shared_ptr<Dataset> dataset_;
  std::int64_t dataset_size_ = 0;
  std::int64_t batches_ = 0;
  std::int64_t rounds_ = 0;
  std::unique_ptr<Pass> pass_;  // last: its workers go before the rest
};

template <MapStyleDataset Dataset>
const typename DataLoaderShard<Dataset>::Batch* DataLoaderShard<Dataset>::start_pass() {
  pass_.reset();  // joins the workers of an abandoned pass
  const std::int64_t start = begin_position();
  auto pass = std::make_unique<Pass>(Pass{epoch_shard(), nullptr, std::nullopt, start - 1});
  const BatchSamplerShard* shard = &pass->shard;
  const std::int64_t first = accelerate::skip_first_batches(pass->shard, start).first_batch();
  std::shared_ptr<Dataset> dataset = dataset_;
  auto load = [dataset, shard](std::int64_t index) -> Batch {
    std::vector<Batch> examples;
    const BatchSamplerShard::Batch indices = shard->batch(index);
    examples.reserve(indices.size());
    for (const std::int64_t sample : indices) examples.emplace_back(dataset->get(static_cast<std::size_t>(sample)));
    return detail::stack_examples(examples);
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
