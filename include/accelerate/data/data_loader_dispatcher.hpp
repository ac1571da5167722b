// DataLoaderDispatcher (seeds: accelerate.data_loader.DataLoaderDispatcher,
// dispatch_batches = true): only the main process reads the dataset; it cuts
// each global batch into one slice per process and scatters the slices, so
// every sample crosses the network at most once. The default for streams.
//
//   accelerate::DataLoaderDispatcher loader(MyStream(...), state,
//       {.batch_size = 32}, {.dispatch_batches = true});
//   for (const torch::data::Example<>& batch : loader) { ... }
//
// The main process collates each global batch (DefaultCollate, or the
// loader's collate function, e.g. PaddingCollate for token sequences, which
// then pads to the longest sample of the global batch) and cuts every tensor
// of it alike along dimension 0: Example<>, tensors, string-keyed maps and
// dicts of tensors, IValue nests of tensors (ScatterableBatch).
//
// The global batch holds total_batch_size() samples: batch_size on each of
// the processes (or batch_size in all, with split_batches), in the order of
// the sampler (map-style) or of the stream. A short last global batch is
// split evenly: with drop_last it is dropped, otherwise it is completed with
// the first samples of the epoch up to a multiple of the world size, and each
// process gets ceil(rows / processes) samples (Accelerate's rule). Semantics
// and examples: docs/data-loading.md, "Dispatching".
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "accelerate/data/batch_pipeline.hpp"
#include "accelerate/data/batch_scatter.hpp"
#include "accelerate/data/batch_sampler_shard.hpp"
#include "accelerate/data/collate.hpp"
#include "accelerate/data/data_loader.hpp"
#include "accelerate/data/data_loader_configuration.hpp"
#include "accelerate/data/data_loader_options.hpp"
#include "accelerate/data/custom_samplers.hpp"
#include "accelerate/data/data_seed.hpp"
#include "accelerate/data/data_loader_shard.hpp"
#include "accelerate/data/loader_state.hpp"
#include "accelerate/data/seedable_sampler.hpp"
#include "accelerate/data/stream_dataset.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/runtime/torch_device.hpp"

namespace accelerate {

namespace detail {
template <class Dataset, bool MapStyle = MapStyleDataset<Dataset>>
struct DispatchedSample {
  using type = SampleOf<Dataset>;
};
template <class Dataset>
struct DispatchedSample<Dataset, false> {
  using type = StreamSampleOf<Dataset>;
};
}  // namespace detail

/// The samples a dispatcher (or a stream loader) reads from `Dataset`: a
/// map-style dataset's get(i), a stream's get_batch(n) elements.
template <class Dataset>
using LoadedSampleOf = typename detail::DispatchedSample<Dataset>::type;

/// The batch a loader of `Dataset` with `Collate` hands out.
template <class Dataset, class Collate>
using LoadedBatchOf = std::remove_cvref_t<std::invoke_result_t<const Collate&, std::vector<LoadedSampleOf<Dataset>>>>;

/// A dataset and a collate function a dispatcher can serve: samples the
/// collate function takes, batches BatchScatter can cut.
template <class Dataset, class Collate>
concept DispatchableWith = (MapStyleDataset<Dataset> || StreamDataset<Dataset>)&&std::invocable<
    const Collate&, std::vector<LoadedSampleOf<Dataset>>>&& ScatterableBatch<LoadedBatchOf<Dataset, Collate>>;

template <class Dataset, class Collate = DefaultCollate>
requires DispatchableWith<Dataset, Collate>
class DataLoaderDispatcher final : public BasicDataLoader<LoadedBatchOf<Dataset, Collate>> {
  using Base = BasicDataLoader<LoadedBatchOf<Dataset, Collate>>;
  using Sample = LoadedSampleOf<Dataset>;
  using Base::attach_state;
  using Base::begin_position;
  using Base::finish_pass;
  using Base::hand_out;
  using Base::position_;

 public:
  using Batch = typename Base::Batch;
  static constexpr bool kMapStyle = MapStyleDataset<Dataset>;

  /// Collective over state's world. Every process passes a dataset; only
  /// the main process's is read. Throws ConfigError (on every process) for a
  /// batch size below 1, split_batches with a batch size that is not a
  /// multiple of the world size, bad worker options, a map-style dataset of
  /// unknown size, or more than one worker over a stream.
  DataLoaderDispatcher(Dataset dataset, const State& state, DataLoaderOptions options = {},
                       DataLoaderConfiguration config = {}, Collate collate_fn = {})
      : options_(std::move(options)),
        config_(config),
        device_(torch_device(state.device())),
        collate_(std::make_shared<const Collate>(std::move(collate_fn))) {
    constexpr std::string_view component = "DataLoaderDispatcher";
    detail::reject_samplers(component, options_);
    const int processes = state.num_processes();
    if (options_.batch_size < 1) {
      detail::loader_error(component, "the batch size is " + std::to_string(options_.batch_size) +
                                          ", but a batch needs at least one sample. Use 1 or more.");
    }
    if (config_.split_batches && options_.batch_size % processes != 0) {
      detail::loader_error(component, "split_batches cuts each batch of " + std::to_string(options_.batch_size) +
                                          " samples into " + std::to_string(processes) +
                                          " equal slices, which needs a batch size that is a multiple of the "
                                          "number of processes. Use a batch size of " +
                                          std::to_string((options_.batch_size / processes + 1) * processes) +
                                          ", or split_batches = false.");
    }
    if (options_.num_workers < 0 || (options_.num_workers > 0 && options_.prefetch_factor < 1)) {
      detail::loader_error(component, "num_workers must be 0 or more and prefetch_factor 1 or more; got " +
                                          std::to_string(options_.num_workers) + " and " +
                                          std::to_string(options_.prefetch_factor) + ".");
    }
    if constexpr (!kMapStyle) {
      if (options_.num_workers > 1) {
        detail::loader_error(component, "a stream is read in order by one thread, but num_workers is " +
                                            std::to_string(options_.num_workers) +
                                            ". Use num_workers = 1 to read ahead on a background thread, or 0.");
      }
      if (options_.shuffle) {
        detail::loader_error(component,
                             "a stream has no indices to shuffle. Shuffle inside the stream (for "
                             "example with a shuffle buffer), or set shuffle = false.");
      }
    } else {
      const auto length = std::as_const(dataset).size();
      if (!length) {
        detail::loader_error(component,
                             "the dataset's size() is unknown, but a map-style dataset is read by "
                             "index 0 ... n-1 and needs n. Give it a size(), or make it a stream "
                             "(get_batch).");
      }
      dataset_size_ = static_cast<std::int64_t>(*length);
    }
    const std::int64_t global = config_.split_batches ? options_.batch_size : options_.batch_size * processes;
    position_.global_batch_size = global;
    position_.world_size = processes;
    position_.dataset_size = dataset_size_;
    position_.seed = detail::choose_data_seed(config_, options_.shuffle, &state, processes, component);
    attach_state(&state, options_.rng_types, component);
    processes_ = processes;
    scatter_ = std::make_unique<BatchScatter>(state);
    if (scatter_->is_main()) dataset_ = std::make_shared<Dataset>(std::move(dataset));
  }

  DataLoaderDispatcher(const DataLoaderDispatcher&) = delete;
  DataLoaderDispatcher& operator=(const DataLoaderDispatcher&) = delete;
  DataLoaderDispatcher(DataLoaderDispatcher&&) = default;
  DataLoaderDispatcher& operator=(DataLoaderDispatcher&&) = default;
  ~DataLoaderDispatcher() override = default;

  [[nodiscard]] bool drops_last_batch() const noexcept override { return options_.drop_last; }
  /// Real samples in the last global batch modulo total_batch_size() (0: it
  /// was full); -1 with drop_last. For a stream it is known once the last
  /// batch has been received, and -1 before.
  [[nodiscard]] std::int64_t remainder() const noexcept override {
    if (options_.drop_last) return -1;
    if constexpr (kMapStyle) return dataset_size_ % this->total_batch_size();
    return stream_remainder_;
  }
  /// Batches of a whole epoch (every process receives the same number).
  [[nodiscard]] std::int64_t size() const requires kMapStyle { return epoch_batches(); }
  /// The dataset's length; -1 for a stream.
  [[nodiscard]] std::int64_t total_dataset_length() const noexcept override { return dataset_size_; }
  [[nodiscard]] std::int64_t batch_size() const noexcept { return options_.batch_size; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return position_.seed; }
  [[nodiscard]] const DataLoaderOptions& options() const noexcept { return options_; }
  [[nodiscard]] const DataLoaderConfiguration& configuration() const noexcept { return config_; }
  [[nodiscard]] const c10::Device& device() const noexcept { return device_; }
  /// Samples the main process has sent to the others (its own slice stays local).
  [[nodiscard]] std::int64_t samples_sent() const noexcept { return scatter_->rows_sent(); }
  [[nodiscard]] std::int64_t bytes_sent() const noexcept { return scatter_->bytes_sent(); }

  // state_dict()/load_state_dict() as for every DataLoader; a stream skips
  // the consumed batches by reading them on the main process.

 private:
  using Global = BatchScatter::Global;

  const Batch* start_pass() override;
  void drop_pass() override { pass_.reset(); }
  [[nodiscard]] BatchSamplerShardOptions shard_options() const override {
    return {.num_processes = processes_,
            .process_index = 0,
            .split_batches = config_.split_batches,
            .even_batches = true};
  }
  const Batch* next_batch() override {
    step();
    return current();
  }
  [[nodiscard]] const Batch* current() const noexcept { return pass_ && pass_->current ? &*pass_->current : nullptr; }

  struct Pass {
    std::unique_ptr<detail::BatchPipeline<std::optional<Global>>> pipeline;  // main only
    std::optional<Global> lookahead;                                         // main only
    std::optional<Batch> current;
    std::int64_t current_index = -1;
    bool over = false;
  };

  [[nodiscard]] std::int64_t batches_per_epoch() const noexcept override {
    return dataset_size_ >= 0 ? epoch_batches() : -1;
  }
  // Batches in an epoch of a map-style dataset.
  [[nodiscard]] std::int64_t epoch_batches() const noexcept {
    const std::int64_t g = this->total_batch_size();
    return options_.drop_last ? dataset_size_ / g : (dataset_size_ + g - 1) / g;
  }

  // Completes `real` rows to the next multiple of the world size with the
  // epoch's first samples, cyclically: the indices of the padding.
  [[nodiscard]] std::int64_t padded_rows(std::int64_t real) const noexcept {
    return (real + processes_ - 1) / processes_ * processes_;
  }

  // Main process: the loader of global batch k of this pass (map-style).
  auto map_style_loader() {
    std::vector<std::int64_t> order;
    if (options_.shuffle) {
      order = seeded_permutation(dataset_size_, position_.seed, position_.epoch);
    } else {
      order.resize(static_cast<std::size_t>(dataset_size_));
      std::iota(order.begin(), order.end(), std::int64_t{0});
    }
    const std::int64_t g = this->total_batch_size();
    const std::int64_t n = dataset_size_;
    auto shared_order = std::make_shared<std::vector<std::int64_t>>(std::move(order));
    return [this, shared_order, g, n, dataset = dataset_, collate = collate_](std::int64_t k) -> std::optional<Global> {
      const std::int64_t first = k * g;
      const std::int64_t real = std::min(g, n - first);
      const std::int64_t rows = real == g ? g : padded_rows(real);
      std::vector<Sample> samples;
      samples.reserve(static_cast<std::size_t>(rows));
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t position = r < real ? first + r : (r - real) % n;
        samples.emplace_back(dataset->get(static_cast<std::size_t>((*shared_order)[position])));
      }
      return Global{detail::to_payload(std::invoke(*collate, std::move(samples))), real, false};
    };
  }

  // Main process: the loader of the next global batch of a stream; k counts
  // in order, so one thread must call it.
  auto stream_loader() {
    struct Progress {
      std::vector<Sample> first;  // the first global batch, to complete the last
      bool ended = false;
    };
    auto progress = std::make_shared<Progress>();
    const std::int64_t g = this->total_batch_size();
    const bool drop_last = options_.drop_last;
    return
        [this, progress, g, drop_last, dataset = dataset_, collate = collate_](std::int64_t) -> std::optional<Global> {
          if (progress->ended) return std::nullopt;
          std::vector<Sample> examples = detail::read_samples(*dataset, static_cast<std::size_t>(g));
          const auto real = static_cast<std::int64_t>(examples.size());
          if (real < g) progress->ended = true;
          if (real == 0 || (real < g && drop_last)) return std::nullopt;
          if (progress->first.empty()) progress->first = examples;  // shares the tensors, copies no data
          const std::int64_t rows = real == g ? g : padded_rows(real);
          const auto cycle = static_cast<std::int64_t>(progress->first.size());
          for (std::int64_t r = real; r < rows; ++r) examples.push_back(progress->first[(r - real) % cycle]);
          return Global{detail::to_payload(std::invoke(*collate, std::move(examples))), real, false};
        };
  }

  // Main process: the next global batch, with `last` set by looking one ahead.
  std::optional<Global> take_next(Pass& pass) {
    std::optional<Global> current = std::move(pass.lookahead);
    pass.lookahead.reset();
    if (!current) return std::nullopt;
    if (auto next = pass.pipeline->next(); next && *next) pass.lookahead = std::move(*next);
    current->last = !pass.lookahead;
    return current;
  }

  // Collective: makes the next slice current, or ends the pass.
  void step() {
    if (!pass_ || pass_->over) return;
    Pass& pass = *pass_;
    std::optional<Global> global;
    if (scatter_->is_main()) {
      try {
        global = take_next(pass);
      } catch (const std::exception& error) {
        pass.over = true;
        pass.current.reset();
        scatter_->fail(error.what());
        throw;
      }
    }
    std::optional<BatchScatter::Slice> slice;
    try {
      slice = scatter_->exchange(std::move(global));
    } catch (...) {
      pass.over = true;
      pass.current.reset();
      throw;
    }
    if (!slice) {
      pass.over = true;
      pass.current.reset();
      pass.pipeline.reset();
      finish_pass(pass.current_index + 1);
      return;
    }
    ++pass.current_index;
    Batch batch;
    detail::from_payload(std::move(slice->batch), batch);
    pass.current.emplace(detail::place_batch(std::move(batch), device_, config_.non_blocking, options_.pin_memory));
    hand_out(pass.current_index, slice->last);
    if (slice->last && !kMapStyle) stream_remainder_ = slice->real_rows % this->total_batch_size();
  }

  DataLoaderOptions options_;
  DataLoaderConfiguration config_;
  c10::Device device_;
  std::shared_ptr<const Collate> collate_;  // shared with the workers' load function
  int processes_ = 1;
  std::shared_ptr<Dataset> dataset_;  // main process only
  std::int64_t dataset_size_ = -1;
  std::int64_t stream_remainder_ = -1;
  std::int64_t passes_started_ = 0;
  std::unique_ptr<BatchScatter> scatter_;
  std::unique_ptr<Pass> pass_;  // last: its workers go before the rest
};

template <class Dataset, class Collate>
requires DispatchableWith<Dataset, Collate>
auto DataLoaderDispatcher<Dataset, Collate>::start_pass() -> const Batch* {
  pass_.reset();
  const std::int64_t start = begin_position();
  auto pass = std::make_unique<Pass>();
  pass->current_index = start - 1;
  if (scatter_->is_main()) {
    try {
      typename detail::BatchPipeline<std::optional<Global>>::Load load;
      std::int64_t last = std::numeric_limits<std::int64_t>::max();
      if constexpr (kMapStyle) {
        load = map_style_loader();
        last = epoch_batches();
      } else {
        if (passes_started_ > 0) detail::restart_stream(*dataset_);
        load = stream_loader();
        // A stream cannot seek: resuming reads the consumed batches again.
        for (std::int64_t k = 0; k < start; ++k) (void)load(k);
      }
      typename detail::BatchPipeline<std::optional<Global>>::WorkerStart start_worker;
      const int workers = options_.num_workers;
      if (workers > 0) {
        const std::uint64_t seed = position_.seed;
        const std::int64_t epoch = position_.epoch;
        auto init = options_.worker_init_fn;
        start_worker = [seed, epoch, workers, init](int worker) {
          const std::uint64_t mine = worker_seed(seed, epoch, 0, worker);
          detail::worker_info_slot() = WorkerInfo{worker, workers, mine};
          if (init) init(worker, mine);
        };
      }
      pass->pipeline =
          std::make_unique<detail::BatchPipeline<std::optional<Global>>>(std::move(load),
                                                                         kMapStyle ? std::min(start, last) : start,
                                                                         last, workers, options_.prefetch_factor,
                                                                         std::move(start_worker));
      if (auto first = pass->pipeline->next(); first && *first) pass->lookahead = std::move(*first);
    } catch (const std::exception& error) {
      scatter_->fail(error.what());
      throw;
    }
  }
  ++passes_started_;
  pass_ = std::move(pass);
  step();
  return current();
}

}  // namespace accelerate
