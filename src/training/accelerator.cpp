#include "accelerate/training/accelerator.hpp"

#include <torch/optim/optimizer.h>
#include <torch/optim/schedulers/lr_scheduler.h>

#include <algorithm>
#include <exception>
#include <set>
#include <string>
#include <utility>

#include "accelerate/amp/grad_scaler.hpp"
#include "accelerate/checkpoint/safetensors.hpp"
#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/config_file.hpp"
#include "accelerate/runtime/env_config.hpp"
#include "accelerate/runtime/logging.hpp"
#include "accelerate/runtime/numa_affinity.hpp"
#include "accelerate/runtime/split_tensor.hpp"
#include "accelerate/training/fully_sharded_model.hpp"
#include "accelerate/training_state/async_state_saver.hpp"
#include "accelerate/training_state/module_state.hpp"
#include "detail/job_step.hpp"
#include "detail/mpi_runtime.hpp"
#include "detail/profile_range.hpp"
#include "training/gradient_sync_strategy.hpp"
#include "training/gradient_use_check.hpp"
#include "training/meta_tensor_check.hpp"

namespace accelerate {
namespace {

ResolvedSettings settings_from(const AcceleratorOptions& options) {
  const EnvConfig environment = EnvConfig::from_environment();
  const std::optional<ConfigFile> file = options.config_file
                                             ? std::optional<ConfigFile>(require_config_file(*options.config_file))
                                             : load_default_config_file();
  return resolve_settings(options, environment, file ? &*file : nullptr);
}

StateOptions state_options(const ResolvedSettings& settings, const checkpoint::ProjectConfiguration& project) {
  // Every setting explicitly: the State would otherwise read the
  // environment again and skip the configuration file.
  StateOptions state;
  state.cpu = settings.cpu;
  state.timeout = settings.timeout;
  // Asynchronous saves write from a thread of their own. MPI started by the
  // program keeps its level: the constructor then says why it falls short.
  state.thread_level =
      project.async_save && !detail::mpi_is_running() ? ThreadLevel::Multiple : settings.mpi_thread_level;
  state.emulated_ranks_per_node = settings.emulated_ranks_per_node;
  state.log_level = settings.log_level;
  return state;
}

void check_init_kwargs(const InitProcessGroupKwargs& kwargs, const State& state) {
  if (kwargs.init_method && !kwargs.init_method->empty() && *kwargs.init_method != "env://") {
    throw ConfigError("InitProcessGroupKwargs: init_method '" + *kwargs.init_method +
                      "' is not supported: the processes are connected by the MPI launcher (mpirun, srun). Leave "
                      "init_method unset.");
  }
  if (!kwargs.backend) return;
  const std::string& backend = *kwargs.backend;
  if (backend == "mpi") {
    if (!state.use_cpu()) {
      throw ConfigError("InitProcessGroupKwargs: backend 'mpi' was asked for, but this run uses " +
                        state.device().str() +
                        ", whose tensors go through NCCL. Leave backend unset, or run with cpu = true.");
    }
  } else if (backend == "nccl") {
    if (state.use_cpu()) {
      throw ConfigError(
          "InitProcessGroupKwargs: backend 'nccl' needs CUDA devices, but this run is on the CPU "
          "(no GPU visible, or cpu = true). Leave backend unset to use MPI for CPU tensors.");
    }
  } else {
    throw ConfigError("InitProcessGroupKwargs: unknown backend '" + backend +
                      "'. Accelerate-HPC uses 'mpi' (CPU tensors) and 'nccl' (CUDA tensors); leave it unset to "
                      "choose by device.");
  }
}

// A State the program made has fixed its settings already: they become the
// Accelerator's, and options that explicitly ask for others are an error
// (the environment and the configuration file gave the State its own).
void take_settings_of(const State& state, const AcceleratorOptions& options, ResolvedSettings& settings) {
  if (options.cpu.value_or(false) && !state.use_cpu()) {
    throw ConfigError(detail::where() +
                      " Accelerator: the options ask for cpu = true, but the State it runs on "
                      "uses " +
                      state.device().str() + ". Build the State with StateOptions::cpu = true, or leave cpu unset.");
  }
  if (options.init_kwargs.timeout && *options.init_kwargs.timeout != state.timeout()) {
    throw ConfigError(detail::where() + " Accelerator: InitProcessGroupKwargs::timeout is " +
                      std::to_string(options.init_kwargs.timeout->count()) + " s, but the State it runs on has " +
                      std::to_string(state.timeout().count()) +
                      " s. Set the timeout in StateOptions::timeout, or leave it unset here.");
  }
  settings.cpu = state.use_cpu();
  settings.timeout = state.timeout();
  settings.mpi_thread_level = state.thread_level_required();
  settings.emulated_ranks_per_node = state.emulated_ranks_per_node();
  settings.log_level = state.log_level();
}

std::shared_ptr<State> require_state(std::shared_ptr<State> state) {
  if (!state) {
    throw ConfigError(detail::where() +
                      " Accelerator: the State pointer is null. Pass a State made with "
                      "std::make_shared<accelerate::State>(...), or use the constructor without one.");
  }
  return state;
}

}  // namespace

Accelerator::Accelerator(AcceleratorOptions options) : Accelerator(OnState{}, std::move(options), nullptr) {}

Accelerator::Accelerator(std::shared_ptr<State> state, AcceleratorOptions options)
    : Accelerator(OnState{}, std::move(options), require_state(std::move(state))) {}

Accelerator::Accelerator(OnState, AcceleratorOptions options, const std::shared_ptr<State>& state)
    : options_(std::move(options)),
      settings_(settings_from(options_)),
      state_(state ? state : std::make_shared<State>(state_options(settings_, options_.project_config))),
      gradient_state_(settings_.accumulation),
      project_(options_.project_config),
      trackers_(options_.log_with, state_->is_main_process()) {
  if (state) take_settings_of(*state_, options_, settings_);
  check_init_kwargs(options_.init_kwargs, *state_);
  check_mixed_precision_supported(settings_.mixed_precision, state_->device());
  project_.validate();
  if (project_.async_save && state_->thread_level_provided() != ThreadLevel::Multiple) {
    throw ConfigError(
        "Accelerator: ProjectConfiguration::async_save writes checkpoints from a thread of their own, "
        "which needs MPI_THREAD_MULTIPLE, but MPI was started at " +
        std::string(to_string(state_->thread_level_provided())) +
        " before this Accelerator (by the program or an earlier State). Start it at that level "
        "(ACCELERATE_MPI_THREAD_LEVEL=multiple, StateOptions::thread_level), or save synchronously.");
  }
  apply_configured_numa_affinity(*state_, settings_.numa_affinity);
  ProcessGroupOptions group_options;
  group_options.timeout = std::chrono::milliseconds(state_->timeout());
  group_options.debug_mode = settings_.debug_mode;
  world_ = ProcessGroup::world(*state_, group_options);
  if (options_.fsdp_plugin) check_plugin(*options_.fsdp_plugin);
  sync_ = training_detail::make_gradient_sync_strategy(
      options_.fsdp_plugin ? &*options_.fsdp_plugin : nullptr,
      {.state = *state_,
       .world = *world_,
       .group_options = group_options,
       .ddp_kwargs = options_.ddp_kwargs,
       .sync_in_backward = [this] {
         // Asked in every gradient hook of a sharded optimizer's parameters.
         if (backward_pass_->load(std::memory_order_acquire) == 0) {
           training_detail::gradient_outside_accelerator_backward(LifetimeWatch{}, "a parameter of the sharded (" +
                                                                                       std::string(sync_->name()) +
                                                                                       ") optimizer");
         }
         return std::all_of(models_.begin(), models_.end(),
                            [](const auto& model) { return model->require_backward_grad_sync(); });
       }});
  if (settings_.mixed_precision == MixedPrecision::FP16) {
    // Sharded, each rank unscales only its shard of the gradient: the ranks
    // agree on an overflow any of them found, so that all skip the step.
    scaler_ = std::make_unique<GradScaler>(options_.scaler_kwargs, sync_->overflow_group());
  }
  if (!settings_.ignored_config_keys.empty() && state_->is_main_process()) {
    std::string keys;
    for (const std::string& key : settings_.ignored_config_keys) keys += (keys.empty() ? "" : ", ") + key;
    Logger(*state_, "accelerate").warning("the configuration file has keys this library does not use: " + keys);
  }
}

void Accelerator::init_trackers(const std::string& project_name, const tracking::LogValues& config) {
  const std::filesystem::path logging_dir(project_.logging_dir.empty() ? project_.project_dir : project_.logging_dir);
  std::string failure;
  try {
    trackers_.init(project_name, logging_dir, config);
  } catch (const std::exception& error) {
    failure = error.what();
  }
  // Only the main process makes the built-in trackers' files: every process
  // learns whether every tracker started, so none runs on alone.
  const std::vector<c10::IValue> outcomes = gather_object(*world_, c10::IValue(failure));
  for (const c10::IValue& outcome : outcomes) {
    if (!outcome.toStringRef().empty()) {
      if (failure.empty()) failure = "another process failed: " + outcome.toStringRef();
      trackers_.abandon();  // every process starts over on the next call
      throw ConfigError(failure);
    }
  }
}

void Accelerator::end_training() {
  (void)wait_for_save();
  trackers_.finish();
  wait_for_everyone();
}

Accelerator::~Accelerator() {
  for (const auto& loader : dataloaders_) loader->set_pass_listener(nullptr);
}

bool Accelerator::optimizer_step_was_skipped() const {
  for (const auto& optimizer : optimizers_) {
    if (optimizer->step_was_skipped()) return true;
  }
  return false;
}

std::shared_ptr<DistributedModel> Accelerator::prepare_model(std::shared_ptr<torch::nn::Module> module) {
  if (!module) throw ConfigError("Accelerator::prepare: the model pointer is null.");
  // Before the move to the device, which cannot copy out of a meta tensor.
  training_detail::refuse_meta_tensors(training_detail::named_module_tensors(*module), {world_.get()},
                                       "Accelerator::prepare", "preparing the model");
  clear_stale_gradients(*module);
  if (options_.device_placement) module->to(device());
  DistributedModelOptions model_options;
  model_options.autocast_dtype = autocast_dtype_of(settings_.mixed_precision);
  model_options.autocast_kwargs = options_.autocast_kwargs;
  sync_->configure_model(model_options);
  auto model = std::make_shared<DistributedModel>(std::move(module), *world_, options_.ddp_kwargs, model_options);
  model->require_accelerator_backward(backward_pass_);
  models_.push_back(model);
  return model;
}

void Accelerator::clear_stale_gradients(torch::nn::Module& module) {
  // A gradient already on a parameter comes from a backward before prepare()
  // (or from an earlier training of the module): never averaged over the
  // ranks, it would be added into the first step's. Cleared here, and said
  // on the rank that had it; a local decision, no collective.
  std::size_t stale = 0;
  std::string first;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    at::Tensor& grad = item.value().mutable_grad();
    if (!grad.defined()) continue;  // (a tied weight's second name finds it cleared)
    if (stale++ == 0) first = item.key();
    grad = at::Tensor();
  }
  if (stale == 0) return;
  Logger(*state_, "accelerate")
      .warning(accelerate::format(
                   "Accelerator::prepare: {} parameter(s) of the model, first '{}', already held a gradient: a "
                   "backward ran on the module before prepare() (or it was trained before). That gradient was never "
                   "averaged over the processes and would have been added into the first step's; it is cleared. Run "
                   "backward only through what prepare() returns, or clear the gradients yourself before prepare() "
                   "(zero_grad with set_to_none).",
                   stale, first),
               LogOptions{.main_process_only = false});
}

std::shared_ptr<AcceleratedOptimizer> Accelerator::prepare(torch::optim::Optimizer& optimizer) {
  auto prepared = std::make_shared<AcceleratedOptimizer>(optimizer, gradient_state_, scaler_.get(),
                                                         [this](const AcceleratedOptimizer& stepped) {
                                                           count_optimizer_step(stepped);
                                                         });
  // Debug mode: a step whose gradients came from no accelerator.backward()
  // (through any model, prepared or not) is refused.
  prepared->require_accelerator_backward(settings_.debug_mode);
  sync_->prepare_optimizer(optimizer, *prepared, prepared_objects());
  optimizers_.push_back(prepared);
  return prepared;
}

void Accelerator::count_optimizer_step(const AcceleratedOptimizer& optimizer) {
  if (!optimizers_.empty() && optimizers_.front().get() == &optimizer) detail::note_training_step(++step_);
}

std::shared_ptr<AcceleratedScheduler> Accelerator::prepare(torch::optim::LRScheduler& scheduler) {
  return prepare_scheduler([&scheduler] { scheduler.step(); });
}

std::shared_ptr<AcceleratedScheduler> Accelerator::prepare_scheduler(std::function<void()> advance) {
  std::vector<const AcceleratedOptimizer*> optimizers;
  for (const auto& optimizer : optimizers_) optimizers.push_back(optimizer.get());
  const AcceleratedSchedulerOptions scheduler_options{
      .step_with_optimizer = options_.step_scheduler_with_optimizer,
      .steps_per_call =
          options_.step_scheduler_per_process && !options_.dataloader_config.split_batches ? num_processes() : 1};
  auto prepared =
      std::make_shared<AcceleratedScheduler>(std::move(advance), gradient_state_, optimizers, scheduler_options);
  schedulers_.push_back(prepared);
  return prepared;
}

void Accelerator::register_loader(std::shared_ptr<DataLoaderBase> loader) {
  if (!loader) throw ConfigError("Accelerator::prepare: the data loader pointer is null.");
  loader->set_pass_listener(&gradient_state_);
  dataloaders_.push_back(std::move(loader));
}

Accelerator::AccumulateScope Accelerator::accumulate() {
  std::vector<DistributedModel*> models;
  for (const auto& model : models_) models.push_back(model.get());
  return accumulate_models(models);
}

Accelerator::AccumulateScope Accelerator::accumulate(DistributedModel& model) { return accumulate_models({&model}); }

Accelerator::AccumulateScope Accelerator::accumulate_models(const std::vector<DistributedModel*>& models) {
  AccumulateScope scope;
  gradient_state_.begin_micro_step();
  const bool communicate = gradient_state_.sync_gradients() || gradient_state_.plugin().sync_each_batch;
  for (DistributedModel* model : models) {
    // An enclosing no_sync (LocalSGD's, or the user's) stays in force on
    // synchronising steps too, as in Accelerate, where accumulate() only
    // ever adds a no_sync.
    const bool previous = model->require_backward_grad_sync();
    scope.restore_.emplace_back(model, previous);
    model->set_require_backward_grad_sync(communicate && previous);
  }
  return scope;
}

void Accelerator::backward(const at::Tensor& loss) {
  at::Tensor scaled = gradient_state_.num_steps() > 1 ? loss / gradient_state_.num_steps() : loss;
  if (scaler_ && scaler_->is_enabled()) scaled = scaler_->scale(scaled);
  // The prepared models' hooks accept gradients while the pass number is set.
  struct PassScope {
    std::atomic<std::uint64_t>& pass;
    ~PassScope() { pass.store(0, std::memory_order_release); }
  } in_pass{*backward_pass_};
  in_pass.pass.store(gradient_state_.note_backward(), std::memory_order_release);
  scaled.backward();
}

void Accelerator::unscale_gradients(AcceleratedOptimizer& optimizer) {
  if (!scaler_ || !scaler_->is_enabled() || optimizer.unscaled()) return;
  // Sharded, the gradients reach the shards (the optimizer's parameters) first.
  sync_->gather_gradients(optimizer);
  scaler_->unscale_(optimizer.optimizer());
  optimizer.mark_unscaled();
}

void Accelerator::unscale_gradients() {
  for (const auto& optimizer : optimizers_) unscale_gradients(*optimizer);
}

training_detail::PreparedObjects Accelerator::prepared_objects() const {
  return {.models = models_, .optimizers = optimizers_};
}

std::optional<double> Accelerator::clip_grad_norm_(const std::vector<at::Tensor>& parameters, double max_norm,
                                                   double norm_type) {
  if (!gradient_state_.sync_gradients()) return std::nullopt;
  unscale_gradients();
  return sync_->clip_grad_norm(parameters, max_norm, norm_type, prepared_objects());
}

void Accelerator::clip_grad_value_(const std::vector<at::Tensor>& parameters, double clip_value) {
  if (!gradient_state_.sync_gradients()) return;
  unscale_gradients();
  sync_->clip_grad_value(parameters, clip_value, prepared_objects());
}

AutocastScope Accelerator::autocast() const { return autocast(options_.autocast_kwargs); }

AutocastScope Accelerator::autocast(const AutocastKwargs& kwargs) const {
  return AutocastScope(device().type(), autocast_dtype_of(settings_.mixed_precision), kwargs);
}

c10::IValue Accelerator::gather_for_metrics_ivalue(const c10::IValue& data, bool use_gather_object) {
  c10::IValue gathered;
  if (use_gather_object) {
    std::vector<c10::IValue> all;
    for (const c10::IValue& part : world_->all_gather_object(data)) {
      for (const c10::IValue& item :
           detail::list_elements(part, "gather_for_metrics(use_gather_object): each rank's value"))
        all.push_back(item);
    }
    gathered = detail::make_list(std::move(all));
  } else {
    gathered = accelerate::gather(*world_, data);
  }
  // Only the last batch of a pass carries samples that merely complete the
  // global batch; remainder 0 means it was full, -1 unknown (drop_last, streams).
  const std::int64_t remainder = gradient_state_.remainder();
  if (!gradient_state_.end_of_dataloader() || remainder <= 0) return gathered;
  if (use_gather_object) {
    const auto items = detail::list_elements(gathered, "gather_for_metrics");
    const auto kept = std::min<std::size_t>(static_cast<std::size_t>(remainder), items.size());
    return detail::make_list(
        std::vector<c10::IValue>(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(kept)));
  }
  return slice_tensors(gathered, 0, remainder);
}

at::Tensor Accelerator::split_between_processes(const at::Tensor& inputs, bool apply_padding) const {
  return accelerate::split_between_processes(*state_, inputs, apply_padding);
}

std::map<std::string, at::Tensor> Accelerator::split_between_processes(const std::map<std::string, at::Tensor>& inputs,
                                                                       bool apply_padding) const {
  return accelerate::split_between_processes(*state_, inputs, apply_padding);
}

bool Accelerator::check_trigger() {
  at::Tensor flag = at::full({1}, trigger_ ? 1 : 0, at::kInt);
  AllReduceOptions max;
  max.op = ReduceOp::Max;
  world_->all_reduce(flag, max);
  const bool raised = flag.item<int>() != 0;
  if (raised) trigger_ = false;
  return raised;
}

checkpoint::TrainingStateRefs Accelerator::checkpoint_refs() {
  checkpoint::TrainingStateRefs refs;
  for (const auto& model : models_) {
    refs.models.push_back(model->module().get());
    refs.model_shards.push_back(sync_->model_shards(*model));
  }
  for (const auto& optimizer : optimizers_) {
    refs.optimizers.push_back(&optimizer->optimizer());
    refs.optimizer_shards.push_back(sync_->optimizer_shards(*optimizer, prepared_objects()));
  }
  for (const auto& scheduler : schedulers_) {
    refs.schedulers.push_back({[scheduler] {
                                 return std::map<std::string, std::int64_t>{{"step_count", scheduler->step_count()}};
                               },
                               [scheduler](const std::map<std::string, std::int64_t>& saved) {
                                 scheduler->fast_forward_to(saved.at("step_count"));
                               }});
  }
  refs.scaler = scaler_.get();
  for (const auto& loader : dataloaders_) {
    refs.dataloaders.push_back(
        {[loader] { return loader->state_dict(); },
         [loader](const std::map<std::string, std::int64_t>& saved) { loader->load_state_dict(saved); }});
  }
  refs.custom_objects = custom_objects_;
  refs.loop_counters = checkpoint::CounterState{
      [this] {
        return std::map<std::string, std::int64_t>{{"step", step_}, {"micro_step", gradient_state_.micro_step()}};
      },
      [this](const std::map<std::string, std::int64_t>& saved) {
        step_ = saved.at("step");
        detail::note_training_step(step_);
        gradient_state_.set_micro_step(saved.at("micro_step"));
      }};
  return refs;
}

std::filesystem::path Accelerator::save_state(const std::optional<std::filesystem::path>& output_dir,
                                              SaveStateOptions options) {
  ACCELERATE_PROFILE_RANGE("accelerate::save_state");
  const checkpoint::CheckpointInfo info{.step = step_,
                                        .mixed_precision = std::string(to_string(settings_.mixed_precision))};
  if (options.async_save.value_or(project_.async_save)) {
    if (!async_saver_) async_saver_ = std::make_unique<checkpoint::AsyncStateSaver>();
    return async_saver_->save(*state_, project_, output_dir, checkpoint_refs(), info);
  }
  (void)wait_for_save();
  return checkpoint::save_training_state(*state_, project_, output_dir, checkpoint_refs(), info);
}

std::optional<std::filesystem::path> Accelerator::wait_for_save() {
  return async_saver_ ? async_saver_->wait() : std::nullopt;
}

bool Accelerator::save_in_progress() const noexcept { return async_saver_ && async_saver_->writing(); }

checkpoint::LoadedTrainingState Accelerator::load_state(const std::optional<std::filesystem::path>& input_dir,
                                                        bool strict) {
  ACCELERATE_PROFILE_RANGE("accelerate::load_state");
  (void)wait_for_save();
  return checkpoint::load_training_state(*state_, project_, input_dir, checkpoint_refs(), strict);
}

std::optional<std::filesystem::path> Accelerator::latest_checkpoint() const {
  if (async_saver_) (void)async_saver_->wait();  // the save in flight may be the newest
  return checkpoint::find_latest_checkpoint(*state_, project_);
}

void Accelerator::register_for_checkpointing(std::shared_ptr<torch::nn::Module> module) {
  if (!module) throw ConfigError("Accelerator::register_for_checkpointing: the module pointer is null.");
  auto save = [module] { return checkpoint::module_state(*module); };
  auto load = [module = std::move(module)](const std::map<std::string, at::Tensor>& saved) {
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : checkpoint::module_state(*module)) tensor.copy_(saved.at(name));
  };
  register_for_checkpointing(
      checkpoint::TensorState{.save = std::move(save), .load = std::move(load), .per_rank = false, .attributes = {}});
}

void Accelerator::register_for_checkpointing(checkpoint::TensorState state) {
  if (!state.save || !state.load) {
    throw ConfigError("Accelerator::register_for_checkpointing: the object needs both a save and a load function.");
  }
  custom_objects_.push_back(std::move(state));
}

void Accelerator::save_model(const DistributedModel& model, const std::filesystem::path& directory,
                             std::uint64_t max_shard_size, bool safe_serialization) {
  FullyShardedModel* const sharded = model.fully_sharded();
  if (sharded != nullptr) sharded->gather_full_parameters();  // collective: every rank is here
  std::string problem;
  if (is_main_process()) {
    try {
      // A tensor registered under several names (tied weights) is written once,
      // under the name met first walking the module (the name PyTorch's
      // named_parameters() gives it, and the one transformers keeps for a
      // head tied to the embedding before it); load_checkpoint_in_model fills
      // every name of it again.
      std::vector<std::pair<std::string, at::Tensor>> tensors;
      std::set<const c10::TensorImpl*> written;
      const auto add = [&](const std::string& name, const at::Tensor& tensor) {
        if (!tensor.defined() || written.insert(tensor.unsafeGetTensorImpl()).second)
          tensors.emplace_back(name, tensor);
      };
      for (const auto& item : model.module()->named_parameters(true)) add(item.key(), item.value());
      for (const auto& item : model.module()->named_buffers(true)) add(item.key(), item.value());
      checkpoint::save_model(tensors, directory,
                             {.max_shard_size = max_shard_size, .safe_serialization = safe_serialization});
    } catch (const std::exception& error) {
      problem = error.what();
    }
  }
  if (sharded != nullptr) sharded->release_full_parameters(/*write_back=*/false);
  c10::IValue shared(problem);
  world_->broadcast_object(shared);
  if (!shared.toStringRef().empty()) throw Error("save_model on the main process failed: " + shared.toStringRef());
}

void Accelerator::free_memory() {
  for (const auto& loader : dataloaders_) loader->set_pass_listener(nullptr);
  for (const auto& loader : dataloaders_) gradient_state_.forget(*loader);
  schedulers_.clear();
  optimizers_.clear();
  models_.clear();
  dataloaders_.clear();
  custom_objects_.clear();
  step_ = 0;
}

}  // namespace accelerate
