#include "accelerate/training/distributed_model.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <set>
#include <sstream>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/format.hpp"
#include "accelerate/training/fully_sharded_model.hpp"
#include "training/distinct_parameters.hpp"
#include "training/gradient_reducer.hpp"
#include "training/gradient_use_check.hpp"
#include "training/meta_tensor_check.hpp"

namespace accelerate {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
const std::string kShardedParameters = "a parameter of the sharded (FULL_SHARD) model";

std::string describe(const std::string& name, const at::Tensor& t) {
  std::ostringstream out;
  out << name << ' ' << c10::toString(t.scalar_type()) << t.sizes();
  return out.str();
}

bool is_power_sgd(DDPCommunicationHookType hook) {
  return hook == DDPCommunicationHookType::POWER_SGD || hook == DDPCommunicationHookType::BATCHED_POWER_SGD;
}

// The dtype messages travel in: comm_hook FP16/BF16, or comm_wrapper (alone,
// or around PowerSGD, whose messages it compresses).
std::optional<c10::ScalarType> wire_dtype(const DistributedDataParallelKwargs& kwargs, std::string& problem) {
  if (is_power_sgd(kwargs.comm_wrapper)) {
    problem = format("comm_wrapper={} is a hook, not a wrapper; set comm_hook={} and comm_wrapper to no, fp16 or bf16",
                     to_string(kwargs.comm_wrapper), to_string(kwargs.comm_wrapper));
    return std::nullopt;
  }
  auto compression = kwargs.comm_hook;
  if (compression == DDPCommunicationHookType::NO || is_power_sgd(compression)) compression = kwargs.comm_wrapper;
  if (!is_power_sgd(kwargs.comm_hook) && kwargs.comm_hook != DDPCommunicationHookType::NO &&
      kwargs.comm_wrapper != DDPCommunicationHookType::NO && kwargs.comm_hook != kwargs.comm_wrapper) {
    problem = format(
        "comm_hook={} and comm_wrapper={} ask for two different compressions; set one of them (a wrapper only adds "
        "to a PowerSGD hook)",
        to_string(kwargs.comm_hook), to_string(kwargs.comm_wrapper));
  }
  switch (compression) {
    case DDPCommunicationHookType::FP16: return c10::ScalarType::Half;
    case DDPCommunicationHookType::BF16: return c10::ScalarType::BFloat16;
    default: break;
  }
  return std::nullopt;
}

// PowerSGD's options when comm_hook asks for it; `problem` names a bad option.
std::optional<detail::PowerSgdOptions> power_sgd_options(const DistributedDataParallelKwargs& kwargs,
                                                         std::string& problem) {
  if (!is_power_sgd(kwargs.comm_hook)) {
    if (!kwargs.comm_state_option.empty()) {
      problem = format(
          "comm_state_option is set, but comm_hook={} has no state; it is for comm_hook=power_sgd or "
          "batched_power_sgd. Leave it empty, or choose one of those hooks",
          to_string(kwargs.comm_hook));
    }
    return std::nullopt;
  }
  detail::PowerSgdOptions options;
  options.batched = kwargs.comm_hook == DDPCommunicationHookType::BATCHED_POWER_SGD;
  problem = detail::parse_power_sgd_options(kwargs.comm_state_option, options);
  return options;
}

// What is wrong with this rank's model or kwargs, or an empty string.
std::string local_problem(const std::vector<std::string>& names, const std::vector<at::Tensor>& parameters,
                          const DistributedDataParallelKwargs& kwargs, const DistributedModelOptions& options,
                          std::string wire_problem) {
  if (!wire_problem.empty()) return wire_problem;
  if (!(kwargs.bucket_cap_mb >= 0)) {
    return "bucket_cap_mb=" + std::to_string(kwargs.bucket_cap_mb) + " must be >= 0 (MiB)";
  }
  if (parameters.empty()) {
    return "the model has no trainable parameters (none with requires_grad); there is nothing to synchronise. Train "
           "at least one parameter, or do not wrap this module";
  }
  for (std::size_t k = 1; k < parameters.size(); ++k) {
    if (parameters[k].device() != parameters[0].device()) {
      return "parameter '" + names[k] + "' is on " + parameters[k].device().str() + " but '" + names[0] + "' is on " +
             parameters[0].device().str() +
             "; a distributed model drives one device per process. Move the whole "
             "module with module->to(device) before wrapping it";
    }
  }
  for (std::size_t k = 0; k < parameters.size(); ++k) {
    if (parameters[k].is_sparse() || !parameters[k].is_floating_point()) {
      return "parameter '" + names[k] + "' is " + describe(names[k], parameters[k]) +
             "; only dense floating-point parameters can be trained data-parallel";
    }
  }
  (void)options;
  return {};
}

std::vector<std::string> to_strings(const std::vector<c10::IValue>& values) {
  std::vector<std::string> out;
  out.reserve(values.size());
  for (const auto& v : values) out.push_back(v.toStringRef());
  return out;
}

}  // namespace

DistributedModel::DistributedModel(std::shared_ptr<torch::nn::Module> module, ProcessGroup& group,
                                   DistributedDataParallelKwargs kwargs, DistributedModelOptions options)
    : module_(std::move(module)),
      group_(group),
      group_watch_(group.lifetime().watch()),
      kwargs_(std::move(kwargs)),
      autocast_dtype_(options.autocast_dtype),
      autocast_kwargs_(options.autocast_kwargs),
      convert_outputs_to_fp32_(options.convert_outputs_to_fp32) {
  if (!module_) throw ConfigError(detail::where() + " DistributedModel: the module pointer is null.");
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    // A module whose FullyShardedModel is gone keeps its parameters' shapes
    // but no memory: every rank is in the same state, so every rank refuses.
    if (item.value().numel() > 0 && item.value().storage().nbytes() == 0) {
      throw ConfigError(detail::where() + " DistributedModel: parameter " + item.key() +
                        " holds no memory: the module was sharded (FULL_SHARD) by a model that is gone, and only "
                        "its shards held the values. Load a checkpoint or state into a fresh module.");
    }
  }
  for (const auto& parameter : module_->parameters(/*recurse=*/true)) {
    autocast_device_ = parameter.device().type();
    break;
  }
  std::vector<std::string> names;
  std::vector<at::Tensor> parameters;
  std::set<const c10::TensorImpl*> listed;
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    // A tied weight (one tensor under several names) has one slot, under the
    // name met first: two slots would reduce its gradient twice.
    if (!listed.insert(item.value().unsafeGetTensorImpl()).second) continue;
    names.push_back(item.key());
    parameters.push_back(item.value());
  }
  std::string wire_problem;
  const auto wire = wire_dtype(kwargs_, wire_problem);
  std::string power_sgd_problem;
  const auto power_sgd = power_sgd_options(kwargs_, power_sgd_problem);
  if (wire_problem.empty()) wire_problem = power_sgd_problem;

  // 1. Every rank learns every rank's problems, so all raise together.
  // A tensor without values (init_empty_weights) comes first: the others'
  // checks read values.
  const std::string meta = training_detail::first_meta_tensor(training_detail::named_module_tensors(*module_));
  const std::string problem = !meta.empty() ? training_detail::meta_tensor_problem(meta, "preparing the model")
                                            : local_problem(names, parameters, kwargs_, options, wire_problem);
  const auto problems = to_strings(group_.all_gather_object(c10::IValue(problem)));
  for (std::size_t r = 0; r < problems.size(); ++r) {
    if (!problems[r].empty()) {
      throw ConfigError(detail::where() + " DistributedModel: on rank " + std::to_string(r) + ": " + problems[r] + ".");
    }
  }

  // 2. The ranks must hold the same parameter list (names, dtypes, shapes):
  //    buckets and all-reduces are matched by position.
  std::string signature;
  for (std::size_t k = 0; k < parameters.size(); ++k) signature += describe(names[k], parameters[k]) + '\n';
  const auto signatures = to_strings(group_.all_gather_object(c10::IValue(signature)));
  for (std::size_t r = 1; r < signatures.size(); ++r) {
    if (signatures[r] == signatures[0]) continue;
    std::istringstream a(signatures[0]);
    std::istringstream b(signatures[r]);
    std::string line_a;
    std::string line_b;
    std::size_t index = 0;
    while (true) {
      const bool more_a = static_cast<bool>(std::getline(a, line_a));
      const bool more_b = static_cast<bool>(std::getline(b, line_b));
      if (!more_a) line_a = "<no parameter>";
      if (!more_b) line_b = "<no parameter>";
      if (line_a != line_b || (!more_a && !more_b)) break;
      ++index;
    }
    throw CollectiveMismatch(detail::where() + " DistributedModel: the ranks' models differ at trainable parameter #" +
                             std::to_string(index) + ": rank 0 has '" + line_a + "', rank " + std::to_string(r) +
                             " has '" + line_b +
                             "'. Every rank must build the same architecture (same parameters, dtypes and shapes, "
                             "registered in the same order) before wrapping it.");
  }

  // 3. Start from rank 0's parameters and buffers (sharded, the
  //    FullyShardedModel below broadcasts them as it cuts its shards).
  if (!options.shard_parameters) {
    at::NoGradGuard no_grad;
    for (auto& p : training_detail::distinct_tensors(module_->parameters(/*recurse=*/true))) {
      at::Tensor alias = p.detach();
      group_.broadcast(alias, accelerate::BroadcastOptions{});
    }
    for (auto& b : training_detail::distinct_tensors(module_->buffers(/*recurse=*/true))) {
      at::Tensor alias = b.detach();
      group_.broadcast(alias, accelerate::BroadcastOptions{});
    }
  }

  if (options.shard_parameters) {
    fully_sharded_ = std::make_unique<FullyShardedModel>(
        module_, options.shard_group != nullptr ? *options.shard_group : group_,
        FullShardOptions{.sync_in_backward =
                             [this] {
                               // Asked once per unit as its gradients are complete, in backward.
                               if (use_check_) use_check_->on_gradient(group_watch_, kShardedParameters);
                               return local_sync_;
                             },
                         .replicas = options.shard_replicas,
                         .units = options.unit_policy,
                         .activation_checkpointing = options.activation_checkpointing,
                         .reshard_after_forward = options.reshard_after_forward});
  }
  if (!options.reduce_gradients || options.shard_parameters) {
    local_names_ = std::move(names);
    return;
  }
  detail::GradientReducerConfig config;
  config.cap_bytes = static_cast<int64_t>(kwargs_.bucket_cap_mb * kMiB);
  config.first_cap_bytes = options.first_bucket_cap_mb < 0
                               ? config.cap_bytes
                               : std::min(config.cap_bytes, static_cast<int64_t>(options.first_bucket_cap_mb * kMiB));
  config.find_unused_parameters = kwargs_.find_unused_parameters;
  config.gradient_as_bucket_view = kwargs_.gradient_as_bucket_view;
  config.wire_dtype = wire;
  config.power_sgd = power_sgd;
  config.progress_in_hooks = options.progress_in_hooks;
  config.finalize_at_backward_end = options.finalize_at_backward_end;
  reducer_ = std::make_unique<detail::GradientReducer>(std::move(parameters), std::move(names), group_, config);
}

DistributedModel::~DistributedModel() = default;

at::Tensor DistributedModel::forward_sharded(const at::Tensor& input) { return fully_sharded_->forward(input); }

void DistributedModel::begin_sharded_forward() { fully_sharded_->begin_forward(); }

void DistributedModel::end_sharded_forward() { fully_sharded_->end_forward(); }

void DistributedModel::abort_sharded_forward() noexcept { fully_sharded_->abort_forward(); }

void DistributedModel::prepare_forward() {
  group_watch_.check("DistributedModel::forward");
  if (kwargs_.broadcast_buffers && group_.size() > 1) {
    at::NoGradGuard no_grad;
    bool any = false;
    for (auto& b : module_->buffers(/*recurse=*/true)) {
      at::Tensor alias = b.detach();
      group_.broadcast(alias, accelerate::BroadcastOptions{});
      any = true;
    }
    if (any && reducer_) reducer_->note_buffer_broadcast();
  }
  if (at::GradMode::is_enabled()) {
    if (reducer_) reducer_->arm();
    if (use_check_) use_check_->note_forward();
  }
}

void DistributedModel::require_accelerator_backward(std::shared_ptr<const std::atomic<std::uint64_t>> pass) {
  // What a forward around the prepared model loses, named in the message.
  std::vector<std::string> skipped;
  if (autocast_dtype_) {
    skipped.push_back(
        accelerate::format("autocast to {} (the matrix products ran in fp32, and the loss was not computed on fp32 "
                           "outputs)",
                           c10::toString(*autocast_dtype_)));
  }
  if (kwargs_.broadcast_buffers && !module_->buffers(/*recurse=*/true).empty()) {
    skipped.emplace_back("the broadcast of rank 0's buffers");
  }
  if (reducer_) {
    skipped.emplace_back(
        "arming the gradient reducer (a rank whose backward reaches no parameter then leaves the others waiting)");
  }
  if (fully_sharded_) skipped.emplace_back("gathering the sharded parameters");
  std::string text;
  for (std::size_t k = 0; k < skipped.size(); ++k) {
    text += (k == 0 ? "" : k + 1 == skipped.size() ? " and " : ", ") + skipped[k];
  }
  use_check_ = std::make_unique<training_detail::GradientUseCheck>(std::move(pass), std::move(text));
  if (reducer_) reducer_->set_use_check(use_check_.get());
}

void DistributedModel::synchronize_gradients() {
  if (reducer_) reducer_->finalize();
}

bool DistributedModel::require_backward_grad_sync() const noexcept {
  return reducer_ ? reducer_->sync_enabled() : local_sync_;
}

void DistributedModel::set_require_backward_grad_sync(bool value) noexcept {
  if (reducer_) {
    reducer_->set_sync_enabled(value);
  } else {
    local_sync_ = value;
  }
}

const std::vector<std::string>& DistributedModel::parameter_names() const noexcept {
  return reducer_ ? reducer_->names() : local_names_;
}

std::vector<std::vector<std::size_t>> DistributedModel::bucket_assignment() const {
  return reducer_ ? reducer_->assignment() : std::vector<std::vector<std::size_t>>{};
}

GradientReducerCounters DistributedModel::counters() const {
  return reducer_ ? reducer_->counters() : GradientReducerCounters{};
}

void DistributedModel::reset_counters() {
  if (reducer_) reducer_->reset_counters();
}

namespace training_detail {

void gradient_outside_accelerator_backward(const LifetimeWatch& watch, const std::string& what) {
  watch.check("DistributedModel (gradient all-reduce in backward)");
  throw ConfigError(accelerate::format(
      "{} Accelerator: a gradient reached {} of a prepared model outside accelerator.backward() (a loss.backward(), "
      "or torch::autograd::backward, on a loss of the prepared model). That backward skips what "
      "accelerator.backward(loss) does: the division of the loss by gradient_accumulation_steps and the fp16 loss "
      "scale, so the step would apply gradients of the wrong size. Call accelerator.backward(loss) instead.",
      detail::where(), what));
}

void GradientUseCheck::first_gradient_of_pass(const LifetimeWatch& watch, const std::string& parameter,
                                              std::uint64_t pass) {
  // A reducer names the parameter; the sharded model's units pass a phrase.
  const std::string what = parameter.find(' ') == std::string::npos ? "parameter '" + parameter + "'" : parameter;
  if (pass == 0) gradient_outside_accelerator_backward(watch, what);
  if (forwards_ == forwards_at_pass_) {
    throw ConfigError(accelerate::format(
        "{} Accelerator: accelerator.backward() reached {} of a prepared model, but no forward went "
        "through the prepared model since its previous backward: the module's own forward was called (net->forward(x) "
        "on the module given to prepare()), which skips {}. Call model(x) on what prepare() returned (or "
        "model->prepare_forward() right before the module's forward, under accelerator.autocast() with mixed "
        "precision).",
        detail::where(), what, bypass_skips_.empty() ? std::string("the wrapper's work") : bypass_skips_));
  }
  forwards_at_pass_ = forwards_;
  seen_pass_ = pass;
}

}  // namespace training_detail
}  // namespace accelerate
