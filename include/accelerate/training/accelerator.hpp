// Accelerator (seeds: accelerate.Accelerator): the one object a training
// program talks to. It makes a plain LibTorch loop data-parallel:
//
//   accelerate::Accelerator accelerator({.gradient_accumulation_steps = 2});
//   auto net = std::make_shared<Net>();
//   torch::optim::SGD sgd(net->parameters(), 0.01);
//   auto [model, optimizer, loader] =
//       accelerator.prepare(net, sgd, accelerate::data_loader(dataset, {.batch_size = 32, .shuffle = true}));
//   for (auto& batch : *loader) {
//     auto accumulating = accelerator.accumulate(*model);
//     auto loss = torch::nll_loss(model(batch.data), batch.target);
//     accelerator.backward(loss);
//     optimizer->step();
//     optimizer->zero_grad();
//   }
//
// A thin facade: the parts live in their own files (State, ProcessGroup,
// DistributedModel, GradScaler, the loaders, GradientState,
// AcceleratedOptimizer/Scheduler, the checkpoint layer); the Accelerator
// wires them together and keeps Accelerate's names. docs/training.md walks
// through a conversion line by line.
#pragma once

#include <c10/core/Device.h>

#include <atomic>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "accelerate/amp/autocast.hpp"
#include "accelerate/comm/operations.hpp"
#include "accelerate/comm/process_group.hpp"
#include "accelerate/data/prepare_data_loader.hpp"
#include "accelerate/format.hpp"
#include "accelerate/random/seed.hpp"
#include "accelerate/runtime/process_control.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/runtime/torch_device.hpp"
#include "accelerate/tracking/tracker_set.hpp"
#include "accelerate/training/accelerated_optimizer.hpp"
#include "accelerate/training/accelerated_scheduler.hpp"
#include "accelerate/training/accelerator_options.hpp"
#include "accelerate/training/distributed_model.hpp"
#include "accelerate/training/find_executable_batch_size.hpp"
#include "accelerate/training/gradient_state.hpp"
#include "accelerate/training/prepared_model.hpp"
#include "accelerate/training_state/training_checkpoint.hpp"

namespace torch::nn {
class Module;
template <typename Contained>
class ModuleHolder;
}  // namespace torch::nn
namespace torch::optim {
class Optimizer;
class LRScheduler;
}  // namespace torch::optim

namespace accelerate {

namespace training_detail {
class GradientSyncStrategy;
struct PreparedObjects;
}  // namespace training_detail

class GradScaler;

namespace checkpoint {
class AsyncStateSaver;
}

/// Accelerator::save_state's options (ours; Accelerate's save_state takes
/// serialization arguments instead).
struct SaveStateOptions {
  /// true: return once the state is copied into host memory, and write and
  /// commit it on a thread of its own (docs/checkpointing.md, "Asynchronous
  /// saves"); false: return once it is committed. Unset:
  /// ProjectConfiguration::async_save.
  std::optional<bool> async_save;
};

/// A dataset, its loader options and its collate function, for
/// Accelerator::prepare, which builds the loader with the accelerator's
/// dataloader_config and rng_types.
template <class Dataset, class Collate = DefaultCollate>
struct DataLoaderRequest {
  Dataset dataset;
  DataLoaderOptions options;
  Collate collate_fn{};
};

template <class Dataset>
DataLoaderRequest<std::decay_t<Dataset>> data_loader(Dataset&& dataset, DataLoaderOptions options = {}) {
  return {std::forward<Dataset>(dataset), std::move(options)};
}
/// With a collate function: samples -> batch (torch's collate_fn).
template <class Dataset, class Collate>
DataLoaderRequest<std::decay_t<Dataset>, std::decay_t<Collate>> data_loader(Dataset&& dataset,
                                                                            DataLoaderOptions options,
                                                                            Collate&& collate_fn) {
  return {std::forward<Dataset>(dataset), std::move(options), std::forward<Collate>(collate_fn)};
}

/// An object with state_dict() -> std::map<std::string, at::Tensor> and
/// load_state_dict(const std::map<std::string, at::Tensor>&).
template <class T>
concept TensorStateDict = requires(T& object, const std::map<std::string, at::Tensor>& state) {
  { object.state_dict() } -> std::convertible_to<std::map<std::string, at::Tensor>>;
  object.load_state_dict(state);
};

/// Autocast for the accelerator's mixed precision while alive; nothing in
/// full precision. Non-movable: hold it as `auto guard = accelerator.autocast();`.
class [[nodiscard]] AutocastScope {
 public:
  AutocastScope(c10::DeviceType device_type, std::optional<c10::ScalarType> dtype, const AutocastKwargs& kwargs) {
    if (dtype) guard_.emplace(device_type, *dtype, kwargs);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  std::optional<AutocastGuard> guard_;
};

class Accelerator {
 public:
  /// Initialises (or adopts) MPI through a State, resolves the settings
  /// (explicit options, then ACCELERATE_* variables, then the configuration
  /// file), optionally binds NUMA affinity, and creates the world process
  /// group. Collective. ConfigError for invalid or conflicting settings, on
  /// every rank.
  explicit Accelerator(AcceleratorOptions options = {});
  /// Runs on a State the program made, for programs that own MPI: coupled
  /// codes and MPMD jobs build it on their own communicator
  /// (StateOptions::comm) and may keep using it for their own work. The
  /// Accelerator shares its ownership. The settings a State fixes (cpu, the
  /// timeout, the MPI thread level, the emulated node size, the log level)
  /// are the State's; options that ask for another cpu or timeout are a
  /// ConfigError. Collective over the State's processes.
  explicit Accelerator(std::shared_ptr<State> state, AcceleratorOptions options = {});
  /// Prepared models, optimizers, schedulers and loaders must not be used
  /// after this: they throw Error (runtime/lifetime.hpp) instead.
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  // --- the process and the run ----------------------------------------------
  [[nodiscard]] const State& state() const noexcept { return *state_; }
  [[nodiscard]] ProcessGroup& process_group() noexcept { return *world_; }
  [[nodiscard]] int process_index() const noexcept { return state_->process_index(); }
  [[nodiscard]] int num_processes() const noexcept { return state_->num_processes(); }
  [[nodiscard]] int local_process_index() const noexcept { return state_->local_process_index(); }
  [[nodiscard]] bool is_main_process() const noexcept { return state_->is_main_process(); }
  [[nodiscard]] bool is_local_main_process() const noexcept { return state_->is_local_main_process(); }
  [[nodiscard]] bool is_last_process() const noexcept { return state_->is_last_process(); }
  [[nodiscard]] bool use_distributed() const noexcept { return state_->num_processes() > 1; }
  [[nodiscard]] DistributedType distributed_type() const noexcept { return state_->distributed_type(); }
  [[nodiscard]] c10::Device device() const { return torch_device(state_->device()); }
  [[nodiscard]] MixedPrecision mixed_precision() const noexcept { return settings_.mixed_precision; }
  [[nodiscard]] const ResolvedSettings& settings() const noexcept { return settings_; }
  [[nodiscard]] int gradient_accumulation_steps() const noexcept { return gradient_state_.num_steps(); }
  [[nodiscard]] GradientState& gradient_state() noexcept { return gradient_state_; }
  /// Whether this micro-step ends with synchronised gradients and an optimizer step.
  [[nodiscard]] bool sync_gradients() const noexcept { return gradient_state_.sync_gradients(); }
  /// Optimizer steps taken (by the first prepared optimizer; skipped fp16 steps count).
  [[nodiscard]] std::int64_t step() const noexcept { return step_; }
  /// Whether the last optimizer step of any prepared optimizer was skipped (fp16 inf/NaN).
  [[nodiscard]] bool optimizer_step_was_skipped() const;
  /// The loss scaler (fp16), or nullptr.
  [[nodiscard]] GradScaler* scaler() noexcept { return scaler_.get(); }
  [[nodiscard]] checkpoint::ProjectConfiguration& project_configuration() noexcept { return project_; }
  [[nodiscard]] const std::string& project_dir() const noexcept { return project_.project_dir; }
  [[nodiscard]] const std::string& logging_dir() const noexcept { return project_.logging_dir; }

  // --- prepare ----------------------------------------------------------------
  /// A model: moved to the device, wrapped in a DistributedModel (parameters
  /// and buffers broadcast from rank 0, bucketed gradient all-reduce that
  /// overlaps backward; with mixed precision, autocast in forward and fp32
  /// outputs). The handle is called like the module: `model(x)`.
  template <class Module>
  requires std::derived_from<Module, torch::nn::Module> PreparedModel<Module> prepare(std::shared_ptr<Module> model) {
    return PreparedModel<Module>(prepare_model(std::static_pointer_cast<torch::nn::Module>(std::move(model))));
  }
  template <class Impl>
  PreparedModel<Impl> prepare(const torch::nn::ModuleHolder<Impl>& model) {
    return PreparedModel<Impl>(prepare_model(std::static_pointer_cast<torch::nn::Module>(model.ptr())));
  }
  /// An optimizer (kept by reference: it must outlive the accelerator's use of it).
  std::shared_ptr<AcceleratedOptimizer> prepare(torch::optim::Optimizer& optimizer);
  /// A LibTorch scheduler (by reference), stepped with the prepared optimizers.
  std::shared_ptr<AcceleratedScheduler> prepare(torch::optim::LRScheduler& scheduler);
  /// A loader built by prepare_data_loader (or any loader), returned as
  /// the same type.
  template <std::derived_from<DataLoaderBase> Loader>
  std::shared_ptr<Loader> prepare(std::shared_ptr<Loader> loader) {
    register_loader(loader);
    return loader;
  }
  template <std::derived_from<DataLoaderBase> Loader>
  std::shared_ptr<Loader> prepare(std::unique_ptr<Loader> loader) {
    return prepare(std::shared_ptr<Loader>(std::move(loader)));
  }
  /// A dataset: the sharded loader for it (prepare_data_loader with this
  /// accelerator's dataloader_config; its rng_types when the options have none).
  template <class Dataset, class Collate>
  auto prepare(DataLoaderRequest<Dataset, Collate> request) {
    if (request.options.rng_types.empty()) request.options.rng_types = options_.rng_types;
    return prepare(prepare_data_loader(std::move(request.dataset), *state_, std::move(request.options),
                                       options_.dataloader_config, std::move(request.collate_fn)));
  }
  /// Several objects at once, returned in the same order (prepared left to right).
  template <class... Objects>
  requires(sizeof...(Objects) > 1) auto prepare(Objects&&... objects) {
    return std::tuple{prepare(std::forward<Objects>(objects))...};
  }
  /// A schedule advanced by a callable (one call = one schedule step).
  std::shared_ptr<AcceleratedScheduler> prepare_scheduler(std::function<void()> advance);

  /// The next pass of `loader` (and only that pass) starts after its first
  /// `num_batches` batches of the epoch, e.g. when resuming mid-epoch; the
  /// passes after it are whole. Returns `loader` itself (Accelerate returns a
  /// new loader; using the original afterwards gives the same result here).
  /// Seeds: skip_first_batches.
  template <std::derived_from<DataLoaderBase> Loader>
  std::shared_ptr<Loader> skip_first_batches(std::shared_ptr<Loader> loader, std::int64_t num_batches) {
    if (!loader) throw ConfigError("Accelerator::skip_first_batches: the data loader pointer is null.");
    loader->skip_first_batches(num_batches);
    return loader;
  }
  /// set_seed with this accelerator's State (so device_specific needs no more):
  /// `accelerator.set_seed(42, {.device_specific = true})`.
  void set_seed(std::uint64_t seed, const SeedOptions& options = {}) const {
    accelerate::set_seed(seed, options, state_.get());
  }

  /// The user's module of a prepared model (seeds: unwrap_model).
  [[nodiscard]] static std::shared_ptr<torch::nn::Module> unwrap_model(const DistributedModel& model) {
    return model.module();
  }

  // --- the training step --------------------------------------------------------
  /// RAII: one micro-step of gradient accumulation for the prepared models
  /// (all of them, or `model`): decides sync_gradients and, on micro-steps
  /// that only accumulate, suppresses the gradient all-reduce.
  class [[nodiscard]] AccumulateScope {
   public:
    AccumulateScope(AccumulateScope&& other) noexcept : restore_(std::move(other.restore_)) { other.restore_.clear(); }
    AccumulateScope(const AccumulateScope&) = delete;
    AccumulateScope& operator=(const AccumulateScope&) = delete;
    AccumulateScope& operator=(AccumulateScope&&) = delete;
    ~AccumulateScope() {
      for (auto& [model, previous] : restore_) model->set_require_backward_grad_sync(previous);
    }

   private:
    friend class Accelerator;
    AccumulateScope() = default;
    std::vector<std::pair<DistributedModel*, bool>> restore_;
  };
  AccumulateScope accumulate();
  AccumulateScope accumulate(DistributedModel& model);
  /// No gradient communication while alive (seeds: no_sync).
  [[nodiscard]] DistributedModel::NoSyncGuard no_sync(DistributedModel& model) { return model.no_sync(); }

  /// loss / gradient_accumulation_steps, scaled for fp16, then backward.
  /// Prepared models refuse gradients from any other backward, and a backward
  /// through a model whose prepared forward was bypassed (ConfigError; see
  /// docs/troubleshooting.md, "Training-loop misuse").
  void backward(const at::Tensor& loss);
  /// Divides the gradients by the loss scale (fp16) once per step, for every
  /// prepared optimizer or just `optimizer`. No-op without a scaler.
  void unscale_gradients();
  void unscale_gradients(AcceleratedOptimizer& optimizer);
  /// Unscales, then clips the gradients' total norm to `max_norm`; returns
  /// the norm before clipping. On micro-steps that only accumulate nothing
  /// happens and nullopt is returned (the gradients are incomplete). With
  /// SHARD_GRAD_OP the prepared optimizer's shards are clipped by the norm
  /// of the whole model's averaged gradient (`parameters` is not consulted,
  /// as with Accelerate's FSDP).
  std::optional<double> clip_grad_norm_(const std::vector<at::Tensor>& parameters, double max_norm,
                                        double norm_type = 2.0);
  /// Unscales, then clamps every gradient to [-clip_value, clip_value] (same
  /// rule as clip_grad_norm_ on accumulating micro-steps).
  void clip_grad_value_(const std::vector<at::Tensor>& parameters, double clip_value);
  /// ATen autocast for the accelerator's mixed precision (none with "no").
  AutocastScope autocast() const;
  AutocastScope autocast(const AutocastKwargs& kwargs) const;

  // --- collectives over all processes ----------------------------------------------
  template <Nestable T>
  T gather(const T& data) {
    return accelerate::gather(*world_, data);
  }
  /// gather(), then, on the last batch of a prepared loader, the samples that
  /// only complete the last global batch are dropped, so an evaluation over
  /// the whole loader sees every sample exactly once. use_gather_object:
  /// each rank passes a list (any objects); the lists are concatenated.
  template <Nestable T>
  T gather_for_metrics(const T& data, bool use_gather_object = false) {
    return from_ivalue<T>(gather_for_metrics_ivalue(to_ivalue(data), use_gather_object));
  }
  c10::IValue gather_for_metrics_ivalue(const c10::IValue& data, bool use_gather_object = false);
  /// Seeds: Accelerator.reduce, whose default is "sum" (the free function's
  /// is "mean"). "none" and `scale` as accelerate::reduce (docs/operations.md).
  template <Nestable T>
  T reduce(const T& data, std::string_view reduction = "sum", double scale = 1.0) {
    return accelerate::reduce(*world_, data, reduction, scale);
  }
  template <Nestable T>
  T pad_across_processes(const T& data, std::int64_t dim = 0, const at::Scalar& pad_index = 0, bool pad_first = false) {
    return accelerate::pad_across_processes(*world_, data, dim, pad_index, pad_first);
  }
  /// This process's share of a vector, a tensor's rows, or every value of a
  /// map (the same share of each); see runtime/process_control.hpp.
  template <class T>
  std::vector<T> split_between_processes(const std::vector<T>& inputs, bool apply_padding = false) const {
    return accelerate::split_between_processes(*state_, inputs, apply_padding);
  }
  template <class T>
  std::map<std::string, std::vector<T>> split_between_processes(const std::map<std::string, std::vector<T>>& inputs,
                                                                bool apply_padding = false) const {
    return accelerate::split_between_processes(*state_, inputs, apply_padding);
  }
  [[nodiscard]] at::Tensor split_between_processes(const at::Tensor& inputs, bool apply_padding = false) const;
  [[nodiscard]] std::map<std::string, at::Tensor> split_between_processes(
      const std::map<std::string, at::Tensor>& inputs, bool apply_padding = false) const;

  /// Raises this rank's flag; check_trigger() on every rank then sees it.
  void set_trigger() noexcept { trigger_ = true; }
  /// Collective: whether any rank set the trigger since the last check (then reset).
  bool check_trigger();

  // --- process control ------------------------------------------------------------
  void wait_for_everyone() const { state_->wait_for_everyone(); }
  /// Prints once per node: on the local main process (seeds: Accelerator.print).
  void print(std::string_view text) const { state_->print(text); }
  /// Formatted (accelerate/format.hpp): `accelerator.print("epoch {}: {:.3f}", epoch, loss)`.
  template <class... Args>
  requires(sizeof...(Args) > 0) void print(format_string<Args...> text, Args&&... args) const {
    if (is_local_main_process()) state_->print(accelerate::format(text, std::forward<Args>(args)...));
  }
  [[nodiscard]] MainProcessFirst main_process_first() const { return accelerate::main_process_first(*state_); }
  [[nodiscard]] MainProcessFirst local_main_process_first() const {
    return accelerate::local_main_process_first(*state_);
  }

  /// Runs `fn(batch_size)` from `starting_batch_size`, halving on
  /// out-of-memory with every rank agreeing (find_executable_batch_size.hpp).
  template <class Fn>
  auto find_executable_batch_size(std::int64_t starting_batch_size, Fn&& fn) {
    return accelerate::find_executable_batch_size(*world_, starting_batch_size, std::forward<Fn>(fn));
  }

  // --- checkpoints ----------------------------------------------------------------
  /// Saves every prepared model, optimizer, scheduler and loader, the
  /// scaler, all ranks' RNG states, the registered objects and the step
  /// counters into one parallel HDF5 checkpoint (training_checkpoint.hpp).
  /// Returns the committed directory, or with an asynchronous save the
  /// directory it will commit (with two tiers, the shared tier's). Collective. Waits for the running
  /// asynchronous save first, and throws its error.
  std::filesystem::path save_state(const std::optional<std::filesystem::path>& output_dir = std::nullopt,
                                   SaveStateOptions options = {});
  /// Waits for the running asynchronous save; returns the directory it
  /// committed (nullopt when none was running) or throws its error, on every
  /// rank. load_state, latest_checkpoint, end_training and the destructor wait too.
  std::optional<std::filesystem::path> wait_for_save();
  /// Whether an asynchronous save is still being written (local, no wait).
  [[nodiscard]] bool save_in_progress() const noexcept;
  /// Restores what save_state wrote (on any number of ranks); unset: the
  /// newest complete checkpoint of the project. Collective.
  checkpoint::LoadedTrainingState load_state(const std::optional<std::filesystem::path>& input_dir = std::nullopt,
                                             bool strict = true);
  /// The newest complete checkpoint of the project, if any. Collective.
  std::optional<std::filesystem::path> latest_checkpoint() const;
  /// Adds an object to every later save_state/load_state (kept by reference).
  template <TensorStateDict T>
  void register_for_checkpointing(T& object) {
    register_for_checkpointing(
        checkpoint::TensorState{[&object] { return std::map<std::string, at::Tensor>(object.state_dict()); },
                                [&object](const std::map<std::string, at::Tensor>& state) {
                                  object.load_state_dict(state);
                                }});
  }
  void register_for_checkpointing(std::shared_ptr<torch::nn::Module> module);
  void register_for_checkpointing(checkpoint::TensorState state);
  /// Writes the unwrapped model's weights as safetensors (main process;
  /// everyone waits). Seeds: save_model.
  void save_model(const DistributedModel& model, const std::filesystem::path& directory,
                  std::uint64_t max_shard_size = 10'000'000'000ULL, bool safe_serialization = true);

  // --- the end ----------------------------------------------------------------
  /// Forgets the prepared objects (models, optimizers, schedulers, loaders)
  /// and those registered for checkpointing, so their memory can go (e.g.
  /// Kokkos views before Kokkos is finalised); the accelerator can prepare
  /// new ones.
  void free_memory();
  /// Finishes the trackers (closing their files), then waits for every
  /// process (seeds: end_training).
  void end_training();

  // --- trackers (seeds: init_trackers, log, get_tracker; docs/tracking.md) -------
  /// Starts the trackers of AcceleratorOptions::log_with for the run
  /// `project_name` and hands them `config` (the hyper-parameters). Call it
  /// on every process: a tracker that cannot start is a ConfigError on all
  /// of them. Built-in trackers write under <logging_dir>/<project_name>/.
  void init_trackers(const std::string& project_name, const tracking::LogValues& config = {});
  /// Logs `values` to every tracker that runs on this process (the main
  /// process, unless a tracker runs everywhere). Not collective.
  void log(const tracking::LogValues& values, std::optional<std::int64_t> step = std::nullopt) {
    trackers_.log(values, step);
  }
  /// The tracker called `name` ("csv", "jsonl", or your tracker's name()).
  /// Where it does not run, a stand-in that ignores every call.
  [[nodiscard]] tracking::GeneralTracker& get_tracker(std::string_view name) { return trackers_.get(name); }

  // --- profiling (seeds: profile, ProfileKwargs; docs/profiling.md) ----------------
  /// LibTorch's profiler on this process with AcceleratorOptions::profile_kwargs,
  /// or `kwargs` when given; every rank writes its own trace. Hold it as
  /// `auto profiler = accelerator.profile();` and call profiler.step() per step.
  [[nodiscard]] Profiler profile(std::optional<ProfileKwargs> kwargs = std::nullopt) const {
    return Profiler(kwargs ? std::move(*kwargs) : options_.profile_kwargs, process_index(), device().is_cuda());
  }

 private:
  struct OnState {};  // tag: the constructor both public ones delegate to
  Accelerator(OnState, AcceleratorOptions options, const std::shared_ptr<State>& state);
  std::shared_ptr<DistributedModel> prepare_model(std::shared_ptr<torch::nn::Module> module);
  void clear_stale_gradients(torch::nn::Module& module);
  void register_loader(std::shared_ptr<DataLoaderBase> loader);
  AccumulateScope accumulate_models(const std::vector<DistributedModel*>& models);
  checkpoint::TrainingStateRefs checkpoint_refs();
  void count_optimizer_step(const AcceleratedOptimizer& optimizer);
  [[nodiscard]] training_detail::PreparedObjects prepared_objects() const;

  AcceleratorOptions options_;
  ResolvedSettings settings_;
  std::shared_ptr<State> state_;
  std::unique_ptr<ProcessGroup> world_;
  GradientState gradient_state_;
  std::unique_ptr<GradScaler> scaler_;
  /// How gradients are synchronised and where weights and optimizer state
  /// live (fsdp_plugin's sharding_strategy; DDP without one). Before the
  /// prepared objects: they point into the groups it owns.
  std::unique_ptr<training_detail::GradientSyncStrategy> sync_;
  checkpoint::ProjectConfiguration project_;
  /// The asynchronous saves' snapshot and writer thread, made at the first
  /// one; destroyed (after waiting) before the State's communicators.
  std::unique_ptr<checkpoint::AsyncStateSaver> async_saver_;
  tracking::TrackerSet trackers_;
  std::vector<std::shared_ptr<DistributedModel>> models_;
  std::vector<std::shared_ptr<AcceleratedOptimizer>> optimizers_;
  std::vector<std::shared_ptr<AcceleratedScheduler>> schedulers_;
  std::vector<std::shared_ptr<DataLoaderBase>> dataloaders_;
  std::vector<checkpoint::TensorState> custom_objects_;
  std::int64_t step_ = 0;
  bool trigger_ = false;
  /// The number of the backward() pass under way, 0 outside one; prepared
  /// models read it in their gradient hooks (shared: they may outlive this).
  std::shared_ptr<std::atomic<std::uint64_t>> backward_pass_ = std::make_shared<std::atomic<std::uint64_t>>(0);
};

}  // namespace accelerate
