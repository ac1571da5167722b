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

#include <mpi.h>
#include <torch/types.h>
#include <torch/data/example.h>

#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "accelerate/data/batch_sampler_shard.hpp"
#include "accelerate/data/data_loader_configuration.hpp"
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
  { static_cast<bool>(const_dataset.size()) };
  { *const_dataset.size() } -> std::convertible_to<std::size_t>;
};

/// The loader options of the underlying torch DataLoader.
struct DataLoaderOptions {
  /// Without split_batches: the batch size of each process. With it: the
  /// batch size of all processes together (a multiple of num_processes).
  std::int64_t batch_size = 1;
  /// Visit the samples in the seeded order of the epoch (else 0 … n-1).
  bool shuffle = false;
  /// Stop the epoch at the first round the samples cannot fill.
  bool drop_last = false;
  /// Threads that load and collate batches ahead of the training loop
  /// (0: load on the calling thread when the batch is needed).
  int num_workers = 0;
  /// With workers: at most num_workers × prefetch_factor batches are loaded
  /// ahead of the one the loop holds (the bounded queue).
  int prefetch_factor = 2;
  /// Called on each worker thread when it starts a pass, with the worker id
  /// and worker_seed(data seed, epoch, rank, worker): seed the worker's own
  /// generators here (torch's worker_init_fn). Also see current_worker_info().
  std::function<void(int worker, std::uint64_t seed)> worker_init_fn = nullptr;
};

/// Where the loader runs when no State is at hand (tests, tools): the world
/// size and rank as plain numbers, and the device of the batches.
struct DataLoaderPlacement {
  int num_processes = 1;
  int process_index = 0;
  std::string device = "cpu";
};

/// The worker thread running the current code (torch's get_worker_info()).
struct WorkerInfo {
  int id = 0;
  int num_workers = 0;
  /// worker_seed(data seed, epoch, rank, id).
  std::uint64_t seed = 0;
};

namespace detail {
inline std::optional<WorkerInfo>& worker_info_slot() noexcept {
  thread_local std::optional<WorkerInfo> info;
  return info;
}

[[noreturn]] inline void loader_error(std::string_view component, const std::string& what) {
  throw ConfigError(where() + " " + std::string(component) + ": " + what);
}

/// Stacks the data and the targets of the examples along a new first dimension.
inline torch::data::Example<> stack_examples(std::vector<torch::data::Example<>>& examples) {
  std::vector<torch::Tensor> data;
  std::vector<torch::Tensor> targets;
  data.reserve(examples.size());
  targets.reserve(examples.size());
  for (auto& example : examples) {
    data.push_back(std::move(example.data));
    targets.push_back(std::move(example.target));
  }
  return {torch::stack(data), torch::stack(targets)};
}

/// Loads the batches first … last-1 in order, on the calling thread
/// (workers == 0) or on worker threads that run at most workers × prefetch
/// batches ahead of the consumer. Batch i is loaded by worker (i - first) %
/// workers, so which worker loads which batch (and hence what its seeded
/// generators draw) does not depend on timing.
template <class Batch>
class BatchPipeline {
 public:
  using Load = std::function<Batch(std::int64_t)>;
  using WorkerStart = std::function<void(int worker)>;

  BatchPipeline(Load load, std::int64_t first, std::int64_t last, int workers, int prefetch, WorkerStart start)
      : load_(std::move(load)), next_(first), last_(last), workers_(workers),
        window_(static_cast<std::int64_t>(workers) * prefetch), consumed_(first) {
    for (int w = 0; w < workers_; ++w) {
      threads_.emplace_back([this, w, first, start] { run_worker(w, first + w, start); });
    }
  }
  BatchPipeline(const BatchPipeline&) = delete;
  BatchPipeline& operator=(const BatchPipeline&) = delete;

  ~BatchPipeline() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (auto& thread : threads_) thread.join();
  }

  /// The next batch in order, or std::nullopt at the end. Rethrows an
  /// exception of the dataset, after which the pipeline is exhausted.
  std::optional<Batch> next() {
    if (next_ >= last_) return std::nullopt;
    const std::int64_t index = next_++;
    if (workers_ == 0) {
      try {
        return load_(index);
      } catch (...) {
        next_ = last_;
        throw;
      }
    }
    std::unique_lock lock(mutex_);
    consumed_ = index;  // batches before index are taken: the window moves
    changed_.notify_all();
    changed_.wait(lock, [&] { return ready_.contains(index); });
    auto node = ready_.extract(index);
    lock.unlock();
    if (std::holds_alternative<std::exception_ptr>(node.mapped())) {
      next_ = last_;
      std::rethrow_exception(std::get<std::exception_ptr>(node.mapped()));
    }
    return std::move(std::get<Batch>(node.mapped()));
  }

 private:
  void run_worker(int worker, std::int64_t index, const WorkerStart& start) {
    try {
      if (start) start(worker);
    } catch (...) {
      publish(index, std::current_exception());
      return;
    }
    for (; index < last_; index += workers_) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || index < consumed_ + window_; });
        if (stop_) return;
      }
      try {
        publish(index, load_(index));
      } catch (...) {
        publish(index, std::current_exception());
        return;
      }
    }
  }

  template <class Value>
  void publish(std::int64_t index, Value&& value) {
    {
      const std::lock_guard lock(mutex_);
      ready_.emplace(index, std::forward<Value>(value));
    }
    changed_.notify_all();
  }

  Load load_;
  std::int64_t next_;
  std::int64_t last_;
  int workers_;
  std::int64_t window_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::int64_t consumed_;  // guarded; the index the consumer waits for
  bool stop_ = false;          // guarded
  std::map<std::int64_t, std::variant<Batch, std::exception_ptr>> ready_;  // guarded
  std::vector<std::thread> threads_;  // last: joined before the rest goes
};

}  // namespace detail

/// The worker thread running the calling code, or std::nullopt on a thread
/// that is not a DataLoaderShard worker (including num_workers = 0).
[[nodiscard]] inline std::optional<WorkerInfo> current_worker_info() noexcept { return detail::worker_info_slot(); }

/// This process's batches of a map-style dataset.
///
/// Each pass (begin() … end()) iterates the BatchSamplerShard of the
/// epoch's order (seeded_permutation(n, seed, epoch) with shuffle, else
/// 0 … n-1), stacks each batch's examples into one Example and moves it to
/// the device. The epoch never advances by itself: call set_epoch.
/// One pass at a time: begin() abandons the previous pass and its iterators.
template <MapStyleDataset Dataset>
class DataLoaderShard {
 public:
  using Batch = torch::data::Example<>;
  class iterator;

  /// Collective over state.world_comm() when the seed must be drawn (shuffle
  /// with a seedable sampler and no data_seed): rank 0 draws it and
  /// broadcasts it. Throws ConfigError for an unknown dataset size, a batch
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
  ~DataLoaderShard() = default;

  /// Starts a pass and loads its first batch. The pass starts at batch 0 of
  /// the epoch, or, right after load_state_dict, where the saved run stopped.
  iterator begin();
  [[nodiscard]] std::default_sentinel_t end() const noexcept { return {}; }

  /// Moves to `epoch` (changes the shuffled order). After load_state_dict,
  /// setting the loaded epoch keeps the resume position.
  void set_epoch(std::int64_t epoch) {
    if (epoch < 0) {
      detail::loader_error("DataLoaderShard::set_epoch", "the epoch is " + std::to_string(epoch) +
                                                             ", but epochs count from 0.");
    }
    if (resume_pending_ && epoch == state_.epoch) return;
    pass_.reset();
    resume_pending_ = false;
    state_.start_epoch(epoch);
    end_of_dataloader_ = false;
  }
  [[nodiscard]] std::int64_t epoch() const noexcept { return state_.epoch; }

  /// True while the loop holds this process's last batch of the pass (set
  /// when that batch is handed out, before the loop body runs).
  [[nodiscard]] bool end_of_dataloader() const noexcept { return end_of_dataloader_; }
  /// Real samples in the last global batch, for gather_for_metrics:
  /// total_dataset_length() % total_batch_size() (0: the last batch is full);
  /// -1 with drop_last, as in Accelerate.
  [[nodiscard]] std::int64_t remainder() const noexcept {
    return options_.drop_last ? -1 : dataset_size_ % total_batch_size();
  }
  /// Batches this process yields in a whole epoch.
  [[nodiscard]] std::int64_t size() const noexcept { return batches_; }
  /// Samples per step of all processes together: G.
  [[nodiscard]] std::int64_t total_batch_size() const noexcept { return state_.global_batch_size; }
  [[nodiscard]] std::int64_t total_dataset_length() const noexcept { return dataset_size_; }
  [[nodiscard]] std::int64_t batch_size() const noexcept { return options_.batch_size; }
  [[nodiscard]] std::uint64_t seed() const noexcept { return state_.seed; }
  [[nodiscard]] const DataLoaderOptions& options() const noexcept { return options_; }
  [[nodiscard]] const DataLoaderConfiguration& configuration() const noexcept { return config_; }
  [[nodiscard]] const torch::Device& device() const noexcept { return device_; }
  [[nodiscard]] Dataset& dataset() noexcept { return *dataset_; }

  /// The position: batches handed out this epoch × G (a pass finished, or
  /// holding this process's last batch, counts as the whole epoch).
  /// Identical on every rank between the same two steps.
  [[nodiscard]] const LoaderState& loader_state() const noexcept { return state_; }
  [[nodiscard]] LoaderState::Dict state_dict() const { return state_.state_dict(); }

  /// Restores a position saved by state_dict() (on any world size dividing
  /// its G): the next begin() continues the saved epoch with exactly the
  /// batches not yet handed out, and the saved seed replaces this loader's.
  /// Throws ConfigError as resume_point() does.
  void load_state_dict(const LoaderState::Dict& dict) {
    const LoaderState saved = LoaderState::from_state_dict(dict);
    const ResumePoint at = resume_point(saved, total_batch_size(), shard_options_, dataset_size_);
    pass_.reset();
    state_.seed = saved.seed;
    state_.epoch = at.epoch;
    state_.samples_consumed = at.batch_index * total_batch_size();
    resume_pending_ = true;
    end_of_dataloader_ = false;
  }

 private:
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
                           "dispatch_batches = true (the main process loads, the others receive) is not offered "
                           "for map-style datasets yet. Leave dispatch_batches unset or false: every process then "
                           "loads only its own batches.");
    }
    if (options_.shuffle && !config_.use_seedable_sampler) {
      detail::loader_error(component,
                           "shuffle with use_seedable_sampler = false (LibTorch's generator, synchronised from rank "
                           "0) is not offered yet. Set use_seedable_sampler = true (the default), which also makes "
                           "exact resume possible.");
    }
    dataset_size_ = static_cast<std::int64_t>(*length);
    shard_options_ = {.num_processes = placement.num_processes,
                      .process_index = placement.process_index,
                      .split_batches = config_.split_batches,
                      .even_batches = config_.even_batches};
    // Validates the batch size against the world and the rank.
    const auto mine = BatchSamplerShard::sequential(dataset_size_, options_.batch_size, options_.drop_last,
                                                    shard_options_);
    BatchSamplerShardOptions first = shard_options_;
    first.process_index = 0;  // rank 0 has the most batches: one per round
    rounds_ = BatchSamplerShard::sequential(dataset_size_, options_.batch_size, options_.drop_last, first).size();
    batches_ = mine.size();
    state_.global_batch_size = mine.total_batch_size();
    state_.world_size = placement.num_processes;
    state_.dataset_size = dataset_size_;
    state_.seed = choose_seed(state, placement.num_processes);
    dataset_ = std::make_shared<Dataset>(std::move(dataset));
  }

  std::uint64_t choose_seed(const State* state, int num_processes) const {
    if (config_.data_seed) return *config_.data_seed;
    if (!options_.shuffle) return 0;
    std::uint64_t seed = 0;
    const bool main = state ? state->is_main_process() : true;
    if (main) {
      std::random_device device;
      seed = (static_cast<std::uint64_t>(device()) << 32) ^ device() ^
             static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    if (state != nullptr) {
      if (state->num_processes() > 1) {
        const int rc = MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, state->world_comm());
        if (rc != MPI_SUCCESS) {
          throw MpiError(detail::where() + " DataLoaderShard: broadcasting the data seed from rank 0 failed. " +
                             "Set DataLoaderConfiguration::data_seed to avoid the broadcast.",
                         rc);
        }
      }
    } else if (num_processes > 1) {
      detail::loader_error("DataLoaderShard",
                           "shuffle without a data_seed on " + std::to_string(num_processes) +
                               " processes needs a State to broadcast a drawn seed, but the loader was built "
                               "from a DataLoaderPlacement. Set DataLoaderConfiguration::data_seed (the same on "
                               "every rank), or build the loader from a State.");
    }
    return seed;
  }

  BatchSamplerShard epoch_shard() const {
    if (!options_.shuffle) {
      return BatchSamplerShard::sequential(dataset_size_, options_.batch_size, options_.drop_last, shard_options_);
    }
    return BatchSamplerShard(seeded_permutation(dataset_size_, state_.seed, state_.epoch), options_.batch_size,
                             options_.drop_last, shard_options_);
  }

  // Makes the pipeline's next batch current, or ends the pass.
  void step() {
    if (!pass_ || !pass_->pipeline) return;  // the pass is over
    Pass& pass = *pass_;
    std::optional<Batch> batch = pass.pipeline->next();
    if (!batch) {
      pass.current.reset();
      pass.pipeline.reset();  // joins the workers
      state_.samples_consumed = rounds_ * total_batch_size();
      end_of_dataloader_ = true;
      return;
    }
    ++pass.current_index;
    pass.current.emplace(batch->data.to(device_, config_.non_blocking),
                         batch->target.to(device_, config_.non_blocking));
    const bool last = pass.current_index + 1 >= pass.shard.size();
    end_of_dataloader_ = last;
    // A rank with one batch fewer (even_batches = false) reaches its end
    // a round early: the epoch is then complete as far as it is concerned.
    state_.samples_consumed = (last ? rounds_ : pass.current_index + 1) * total_batch_size();
  }

  DataLoaderOptions options_;
  DataLoaderConfiguration config_;
  torch::Device device_;
  BatchSamplerShardOptions shard_options_;
  std::shared_ptr<Dataset> dataset_;
  std::int64_t dataset_size_ = 0;
  std::int64_t batches_ = 0;
  std::int64_t rounds_ = 0;
  LoaderState state_;
  bool resume_pending_ = false;
  bool end_of_dataloader_ = false;
  std::unique_ptr<Pass> pass_;  // last: its workers go before the rest
};

/// Input iterator over a pass; compares equal to end() when it is over.
template <MapStyleDataset Dataset>
class DataLoaderShard<Dataset>::iterator {
 public:
  using iterator_concept = std::input_iterator_tag;
  using value_type = Batch;
  using difference_type = std::ptrdiff_t;
  using reference = const Batch&;

  iterator() = default;
  explicit iterator(DataLoaderShard* loader) noexcept : loader_(loader) {}

  reference operator*() const { return *loader_->pass_->current; }
  const Batch* operator->() const { return &*loader_->pass_->current; }
  iterator& operator++() {
    loader_->step();
    return *this;
  }
  void operator++(int) { ++*this; }
  friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept { return it.done(); }

 private:
  [[nodiscard]] bool done() const noexcept {
    return loader_ == nullptr || !loader_->pass_ || !loader_->pass_->current;
  }

  DataLoaderShard* loader_ = nullptr;
};

template <MapStyleDataset Dataset>
typename DataLoaderShard<Dataset>::iterator DataLoaderShard<Dataset>::begin() {
  pass_.reset();  // joins the workers of an abandoned pass
  const std::int64_t start = resume_pending_ ? state_.batches_consumed() : 0;
  resume_pending_ = false;
  state_.samples_consumed = start * total_batch_size();
  end_of_dataloader_ = false;
  auto pass = std::make_unique<Pass>(Pass{epoch_shard(), nullptr, std::nullopt, start - 1});
  const BatchSamplerShard* shard = &pass->shard;
  const std::int64_t first = skip_first_batches(pass->shard, start).first_batch();
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
    const std::uint64_t seed = state_.seed;
    const std::int64_t epoch = state_.epoch;
    const int rank = shard_options_.process_index;
    auto init = options_.worker_init_fn;
    start_worker = [seed, epoch, rank, workers, init](int worker) {
      const std::uint64_t mine = worker_seed(seed, epoch, rank, worker);
      detail::worker_info_slot() = WorkerInfo{worker, workers, mine};
      if (init) init(worker, mine);
    };
  }
  pass->pipeline = std::make_unique<detail::BatchPipeline<Batch>>(
      std::move(load), std::min(first, pass->shard.size()), pass->shard.size(), workers, options_.prefetch_factor,
      std::move(start_worker));
  pass_ = std::move(pass);
  step();
  return iterator(this);
}

}  // namespace accelerate
