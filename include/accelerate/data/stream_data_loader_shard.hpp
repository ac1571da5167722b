// StreamDataLoaderShard (dispatch_batches = false over a stream): every
// process reads the whole stream and keeps its own slice of each round
// (IterableDatasetShard's rule, seeds: IterableDatasetShard), so no data
// travels between processes. Use it when reading is cheap and local on every
// node; otherwise the dispatcher (the default for streams) reads once.
//
// The samples are collated as a map-style loader's are: DefaultCollate
// stacks Example<> samples and string-keyed maps, and a collate function
// (PaddingCollate for token sequences) makes any other batch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "accelerate/data/collate.hpp"
#include "accelerate/data/custom_samplers.hpp"
#include "accelerate/data/data_loader.hpp"
#include "accelerate/data/data_loader_configuration.hpp"
#include "accelerate/data/data_loader_options.hpp"
#include "accelerate/data/iterable_dataset_shard.hpp"
#include "accelerate/data/loader_state.hpp"
#include "accelerate/data/skip.hpp"
#include "accelerate/data/stream_dataset.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/runtime/torch_device.hpp"

namespace accelerate {

/// The batch a stream loader of `Dataset` with `Collate` hands out.
template <StreamDataset Dataset, class Collate>
using StreamBatchOf = std::remove_cvref_t<std::invoke_result_t<const Collate&, std::vector<StreamSampleOf<Dataset>>>>;

/// A collate function for the samples of the stream `D`.
template <class Collate, class D>
concept StreamCollateFor = StreamDataset<D> && std::invocable<const Collate&, std::vector<StreamSampleOf<D>>> &&
    std::movable<StreamBatchOf<D, Collate>>;

template <StreamDataset Dataset, StreamCollateFor<Dataset> Collate = DefaultCollate>
class StreamDataLoaderShard final : public BasicDataLoader<StreamBatchOf<Dataset, Collate>> {
  using Base = BasicDataLoader<StreamBatchOf<Dataset, Collate>>;
  using Sample = StreamSampleOf<Dataset>;
  using Base::attach_state;
  using Base::begin_position;
  using Base::finish_pass;
  using Base::hand_out;
  using Base::position_;

 public:
  using Batch = typename Base::Batch;

  /// No communication. Throws ConfigError for a batch size below 1,
  /// split_batches with a batch size that is not a multiple of the world
  /// size, shuffle (a stream has no indices), workers, or dispatch_batches =
  /// true (that is DataLoaderDispatcher).
  StreamDataLoaderShard(Dataset dataset, const State& state, DataLoaderOptions options = {},
                        DataLoaderConfiguration config = {}, Collate collate_fn = {})
      : StreamDataLoaderShard(std::move(dataset),
                              DataLoaderPlacement{state.num_processes(), state.process_index(), state.device()},
                              std::move(options), config, std::move(collate_fn), &state) {}

  StreamDataLoaderShard(Dataset dataset, const DataLoaderPlacement& placement, DataLoaderOptions options = {},
                        DataLoaderConfiguration config = {}, Collate collate_fn = {})
      : StreamDataLoaderShard(std::move(dataset), placement, std::move(options), config, std::move(collate_fn),
                              nullptr) {}

 private:
  StreamDataLoaderShard(Dataset dataset, const DataLoaderPlacement& placement, DataLoaderOptions options,
                        DataLoaderConfiguration config, Collate collate_fn, const State* state)
      : dataset_(std::make_shared<Dataset>(std::move(dataset))),
        collate_(std::move(collate_fn)),
        options_(std::move(options)),
        config_(config),
        device_(torch_device(placement.device)),
        sharding_{.batch_size = options_.batch_size,
                  .drop_last = options_.drop_last,
                  .num_processes = placement.num_processes,
                  .process_index = placement.process_index,
                  .split_batches = config_.split_batches} {
    constexpr std::string_view component = "StreamDataLoaderShard";
    detail::reject_samplers(component, options_);
    if (config_.dispatch_batches.value_or(false)) {
      detail::loader_error(component,
                           "dispatch_batches = true asks for the main process to read and scatter, "
                           "which is DataLoaderDispatcher's job. Build a DataLoaderDispatcher, or set "
                           "dispatch_batches = false.");
    }
    if (options_.shuffle) {
      detail::loader_error(component,
                           "a stream has no indices to shuffle. Shuffle inside the stream, or set "
                           "shuffle = false.");
    }
    if (options_.num_workers != 0) {
      detail::loader_error(component,
                           "every process reads the stream in order on the calling thread; "
                           "num_workers must be 0 (it is " +
                               std::to_string(options_.num_workers) + ").");
    }
    // Validates the batch size against the world (throws ConfigError).
    const IterableDatasetShard<Sample> probe([] { return std::optional<Sample>(); }, sharding_);
    position_.global_batch_size = probe.total_batch_size();
    position_.world_size = placement.num_processes;
    position_.dataset_size = -1;
    attach_state(state, options_.rng_types, component);
  }

 public:
  [[nodiscard]] std::int64_t remainder() const noexcept override { return options_.drop_last ? -1 : remainder_; }
  [[nodiscard]] std::int64_t total_dataset_length() const noexcept override { return -1; }
  // state_dict()/load_state_dict() as for every DataLoader. A stream cannot
  // seek: the next pass reads and discards the consumed rounds on every
  // process.

 private:
  void drop_pass() override { pass_.reset(); }
  [[nodiscard]] BatchSamplerShardOptions shard_options() const override {
    return {.num_processes = sharding_.num_processes,
            .process_index = sharding_.process_index,
            .split_batches = config_.split_batches,
            .even_batches = true};
  }

  struct Pass {
    // Counts the samples read, for the remainder of the last round.
    std::shared_ptr<std::int64_t> read = std::make_shared<std::int64_t>(0);
    std::unique_ptr<IterableDatasetShard<Sample>> shard;
    std::optional<Batch> current;
    std::optional<Batch> lookahead;
    std::int64_t index = -1;
  };

  std::optional<Batch> read_batch(Pass& pass) {
    std::optional<std::vector<Sample>> samples = pass.shard->next_batch();
    if (!samples) return std::nullopt;
    return std::invoke(collate_, std::move(*samples));
  }

  const Batch* start_pass() override {
    pass_.reset();
    if (passes_started_++ > 0) detail::restart_stream(*dataset_);
    const std::int64_t start = begin_position();
    auto pass = std::make_unique<Pass>();
    auto read = pass->read;
    auto dataset = dataset_;
    pass->shard = std::make_unique<IterableDatasetShard<Sample>>(
        [dataset, read]() -> std::optional<Sample> {
          std::vector<Sample> one = detail::read_samples(*dataset, 1);
          if (one.empty()) return std::nullopt;
          ++*read;
          return std::move(one.front());
        },
        sharding_);
    accelerate::skip_first_batches(*pass->shard, start);
    pass->index = start - 1;
    pass->lookahead = read_batch(*pass);
    pass_ = std::move(pass);
    return next_batch();
  }

  const Batch* next_batch() override {
    if (!pass_) return nullptr;
    Pass& pass = *pass_;
    pass.current.reset();
    if (!pass.lookahead) {
      finish_pass(pass.index + 1);
      return nullptr;
    }
    Batch batch = std::move(*pass.lookahead);
    pass.lookahead = read_batch(pass);
    ++pass.index;
    hand_out(pass.index, !pass.lookahead);
    if (!pass.lookahead) remainder_ = *pass.read % this->total_batch_size();
    pass.current.emplace(detail::place_batch(std::move(batch), device_, config_.non_blocking, options_.pin_memory));
    return &*pass.current;
  }

  std::shared_ptr<Dataset> dataset_;
  Collate collate_;
  DataLoaderOptions options_;
  DataLoaderConfiguration config_;
  c10::Device device_;
  IterableDatasetShardOptions sharding_;
  std::int64_t remainder_ = -1;
  std::int64_t passes_started_ = 0;
  std::unique_ptr<Pass> pass_;
};

}  // namespace accelerate
