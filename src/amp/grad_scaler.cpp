#include "accelerate/amp/grad_scaler.hpp"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"

namespace accelerate {

namespace {

[[noreturn]] void fail(const std::string& call, const std::string& what) {
  throw ConfigError("GradScaler::" + call + ": " + what);
}

void check_kwargs(const GradScalerKwargs& kwargs) {
  if (!(std::isfinite(kwargs.init_scale) && kwargs.init_scale > 0)) {
    fail("GradScaler", "init_scale must be a positive finite number, got " + std::to_string(kwargs.init_scale) + ".");
  }
  if (!(std::isfinite(kwargs.growth_factor) && kwargs.growth_factor > 1.0)) {
    fail("GradScaler", "growth_factor must be > 1, got " + std::to_string(kwargs.growth_factor) + ".");
  }
  if (!(kwargs.backoff_factor > 0.0 && kwargs.backoff_factor < 1.0)) {
    fail("GradScaler", "backoff_factor must lie in (0, 1), got " + std::to_string(kwargs.backoff_factor) + ".");
  }
  if (kwargs.growth_interval < 1) {
    fail("GradScaler", "growth_interval must be >= 1, got " + std::to_string(kwargs.growth_interval) + ".");
  }
}

std::vector<at::Tensor> parameters_of(const torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> parameters;
  for (const auto& group : optimizer.param_groups()) {
    parameters.insert(parameters.end(), group.params().begin(), group.params().end());
  }
  return parameters;
}

const void* key_of(const at::Tensor& parameter) { return parameter.unsafeGetTensorImpl(); }

// `grads` with every run of gradients that lie back to back in one storage
// (a flat buffer's, as FlatParameters lays them out) replaced by one 1-D
// tensor over the run: the
// check and the division then cost one pass per run, not one per tensor.
// Gradients that are not contiguous, or only overlap, stay as they are.
std::vector<at::Tensor> flat_runs(const std::vector<at::Tensor>& grads) {
  struct Place {
    std::uintptr_t storage;
    int dtype;
    std::int64_t offset;
    std::size_t index;
  };
  std::vector<Place> places;
  std::vector<at::Tensor> runs;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const at::Tensor& grad = grads[i];
    if (grad.is_contiguous() && grad.has_storage() && grad.numel() > 0) {
      places.push_back({reinterpret_cast<std::uintptr_t>(grad.storage().unsafeGetStorageImpl()),
                        static_cast<int>(grad.scalar_type()), grad.storage_offset(), i});
    } else {
      runs.push_back(grad);
    }
  }
  std::sort(places.begin(), places.end(), [](const Place& a, const Place& b) {
    return std::tie(a.storage, a.dtype, a.offset) < std::tie(b.storage, b.dtype, b.offset);
  });
  for (std::size_t first = 0; first < places.size();) {
    const at::Tensor& head = grads[places[first].index];
    std::int64_t end = places[first].offset + head.numel();
    std::size_t last = first + 1;
    while (last < places.size() && places[last].storage == places[first].storage &&
           places[last].dtype == places[first].dtype && places[last].offset == end) {
      end += grads[places[last].index].numel();
      ++last;
    }
    if (last == first + 1) {
      runs.push_back(head);
    } else {
      at::Tensor run = at::empty({0}, head.options());
      run.set_(head.storage(), places[first].offset, {end - places[first].offset}, {1});
      runs.push_back(run);
    }
    first = last;
  }
  return runs;
}

// Whether any gradient is inf/NaN, dividing all of them by `inv_scale` in
// place. CUDA gradients go through ATen's fused kernel (one launch per
// device and dtype, present in every LibTorch since 1.6); CPU gradients
// through plain ops, because LibTorch 1.13 has no CPU kernel for it.
bool check_and_unscale(const std::vector<at::Tensor>& grads, float inv_scale) {
  // Keyed by (CUDA device index, dtype).
  std::map<std::pair<int, int>, std::vector<at::Tensor>> fused;
  at::Tensor cpu_bad;  // bool scalar: some CPU gradient was not finite
  for (const auto& grad : flat_runs(grads)) {
    if (grad.is_cuda()) {
      fused[{grad.device().index(), static_cast<int>(grad.scalar_type())}].push_back(grad);
      continue;
    }
    const at::Tensor bad = at::logical_not(at::isfinite(grad)).any();
    cpu_bad = cpu_bad.defined() ? at::logical_or(cpu_bad, bad) : bad;
    grad.mul_(inv_scale);
  }
  bool found = cpu_bad.defined() && cpu_bad.item<bool>();
  for (auto& [key, group] : fused) {
    const auto options = at::TensorOptions().dtype(at::kFloat).device(group.front().device());
    at::Tensor found_inf = at::zeros({1}, options);
    const at::Tensor inv = at::full({1}, inv_scale, options);
    at::_amp_foreach_non_finite_check_and_unscale_(group, found_inf, inv);
    found = found || found_inf.item<float>() != 0.0F;
  }
  return found;
}

}  // namespace

// --- GradScalerState ---------------------------------------------------------

namespace {

constexpr const char* kScale = "scale";
constexpr const char* kGrowthFactor = "growth_factor";
constexpr const char* kBackoffFactor = "backoff_factor";
constexpr const char* kGrowthInterval = "growth_interval";
constexpr const char* kGrowthTracker = "_growth_tracker";

double number_at(const c10::impl::GenericDict& dict, const char* key) {
  const auto found = dict.find(key);
  if (found == dict.end()) fail("load_state_dict", std::string("the state dict has no '") + key + "' entry.");
  const c10::IValue& value = found->value();
  if (value.isDouble()) return value.toDouble();
  if (value.isInt()) return static_cast<double>(value.toInt());
  if (value.isTensor() && value.toTensor().numel() == 1) return value.toTensor().item<double>();
  fail("load_state_dict", std::string("entry '") + key + "' is a " + value.tagKind() + ", not a number.");
}

}  // namespace

c10::IValue GradScalerState::to_ivalue() const {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert(kScale, static_cast<double>(scale));
  dict.insert(kGrowthFactor, growth_factor);
  dict.insert(kBackoffFactor, backoff_factor);
  dict.insert(kGrowthInterval, growth_interval);
  dict.insert(kGrowthTracker, growth_tracker);
  return dict;
}

GradScalerState GradScalerState::from_ivalue(const c10::IValue& value) {
  if (!value.isGenericDict()) fail("load_state_dict", std::string("expected a dict, got a ") + value.tagKind() + ".");
  const auto dict = value.toGenericDict();
  GradScalerState state;
  state.scale = static_cast<float>(number_at(dict, kScale));
  state.growth_factor = number_at(dict, kGrowthFactor);
  state.backoff_factor = number_at(dict, kBackoffFactor);
  state.growth_interval = static_cast<std::int64_t>(number_at(dict, kGrowthInterval));
  state.growth_tracker = static_cast<std::int64_t>(number_at(dict, kGrowthTracker));
  return state;
}

std::map<std::string, at::Tensor> GradScalerState::to_tensors() const {
  return {
      {kScale, at::scalar_tensor(scale, at::kFloat)},
      {kGrowthFactor, at::scalar_tensor(growth_factor, at::kDouble)},
      {kBackoffFactor, at::scalar_tensor(backoff_factor, at::kDouble)},
      {kGrowthInterval, at::scalar_tensor(growth_interval, at::kLong)},
      {kGrowthTracker, at::scalar_tensor(growth_tracker, at::kLong)},
  };
}

GradScalerState GradScalerState::from_tensors(const std::map<std::string, at::Tensor>& tensors) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  for (const auto& [key, tensor] : tensors) {
    if (!tensor.defined() || tensor.numel() != 1) {
      fail("load_state", "tensor '" + key + "' must hold exactly one number.");
    }
    dict.insert(key, tensor.is_floating_point() ? c10::IValue(tensor.item<double>())
                                                : c10::IValue(tensor.item<std::int64_t>()));
  }
  return from_ivalue(dict);
}

// --- GradScaler --------------------------------------------------------------

GradScaler::GradScaler(const GradScalerKwargs& kwargs, ProcessGroup* found_inf_group)
    : kwargs_(kwargs), found_inf_group_(found_inf_group), scale_(static_cast<float>(kwargs.init_scale)) {
  check_kwargs(kwargs_);
}

at::Tensor GradScaler::scale(const at::Tensor& loss) const {
  if (!kwargs_.enabled) return loss;
  if (!loss.defined()) fail("scale", "the loss is an undefined tensor.");
  // A 0-d fp32 factor, as PyTorch's scale tensor: same type promotion.
  return loss * at::scalar_tensor(scale_, at::TensorOptions().dtype(at::kFloat).device(loss.device()));
}

std::vector<at::Tensor> GradScaler::scale(const std::vector<at::Tensor>& outputs) const {
  std::vector<at::Tensor> scaled;
  scaled.reserve(outputs.size());
  for (const auto& output : outputs) scaled.push_back(scale(output));
  return scaled;
}

void GradScaler::check_not_stepped(const torch::optim::Optimizer& optimizer, const char* call) const {
  if (stepped_.count(&optimizer) != 0) {
    fail(call, std::string(call) == "step"
                   ? "step() has already been called for this optimizer since the last update(). Call update() "
                     "once per iteration, after step()."
                   : "unscale_() is being called after step() for this optimizer. Unscale before step(), or "
                     "call update() first.");
  }
}

void GradScaler::unscale_parameters(const std::vector<at::Tensor>& parameters, const char* call) {
  std::vector<at::Tensor> grads;
  std::unordered_set<const void*> seen;  // a parameter listed twice is unscaled once
  for (const auto& parameter : parameters) {
    if (!seen.insert(key_of(parameter)).second) continue;
    if (unscaled_parameters_.count(key_of(parameter)) != 0) {
      fail(call,
           "unscale_() has already been called on these gradients since the last update(). Unscale once per "
           "iteration (step() unscales by itself when unscale_ was not called).");
    }
    const at::Tensor& grad = parameter.grad();
    if (!grad.defined()) continue;
    if (grad.is_sparse()) fail(call, "sparse gradients are not supported by the GradScaler.");
    if (grad.scalar_type() == at::kHalf) {
      fail(call,
           "attempting to unscale FP16 gradients. Keep the parameters (and so their gradients) in fp32 and let "
           "autocast run the forward pass in fp16.");
    }
    grads.push_back(grad);
  }
  // PyTorch's reciprocal: computed in double, rounded to float.
  const float inv_scale = static_cast<float>(1.0 / static_cast<double>(scale_));
  bool found = check_and_unscale(grads, inv_scale);
  if (found_inf_group_ != nullptr) {
    at::Tensor flag = at::full({1}, found ? 1.0F : 0.0F, at::kFloat);
    AllReduceOptions max;
    max.op = ReduceOp::Max;
    found_inf_group_->all_reduce(flag, max);
    found = flag.item<float>() != 0.0F;
  }
  const std::size_t record = unscaled_.size();
  unscaled_.push_back(Unscaled{found});
  for (const auto& parameter : parameters) unscaled_parameters_.emplace(key_of(parameter), record);
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!kwargs_.enabled) return;
  check_not_stepped(optimizer, "unscale_");
  unscale_parameters(parameters_of(optimizer), "unscale_");
}

void GradScaler::unscale_(const std::vector<at::Tensor>& parameters) {
  if (!kwargs_.enabled) return;
  unscale_parameters(parameters, "unscale_");
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  return step(optimizer, [&optimizer] { optimizer.step(); });
}

bool GradScaler::step(torch::optim::Optimizer& optimizer, const std::function<void()>& do_step) {
  if (!kwargs_.enabled) {
    do_step();
    return true;
  }
  check_not_stepped(optimizer, "step");
  // Unscale whatever unscale_ has not covered yet (all of it, usually).
  std::vector<at::Tensor> pending;
  const auto parameters = parameters_of(optimizer);
  for (const auto& parameter : parameters) {
    if (unscaled_parameters_.count(key_of(parameter)) == 0) pending.push_back(parameter);
  }
  if (!pending.empty()) unscale_parameters(pending, "step");
  bool found = false;
  for (const auto& parameter : parameters) {
    found = found || unscaled_[unscaled_parameters_.at(key_of(parameter))].found_inf;
  }
  stepped_.insert(&optimizer);
  if (found) return false;
  do_step();
  return true;
}

void GradScaler::update() {
  if (!kwargs_.enabled) return;
  if (unscaled_.empty()) {
    fail("update",
         "no inf checks were recorded since the last update(). Call step(optimizer) (or unscale_) before "
         "update().");
  }
  bool found = false;
  for (const auto& record : unscaled_) found = found || record.found_inf;
  // The rule of ATen's _amp_update_scale_, on the host.
  if (found) {
    scale_ = static_cast<float>(static_cast<double>(scale_) * kwargs_.backoff_factor);
    growth_tracker_ = 0;
  } else if (growth_tracker_ + 1 >= kwargs_.growth_interval) {
    const auto grown = static_cast<float>(static_cast<double>(scale_) * kwargs_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  } else {
    ++growth_tracker_;
  }
  unscaled_.clear();
  unscaled_parameters_.clear();
  stepped_.clear();
}

void GradScaler::update(double new_scale) {
  if (!kwargs_.enabled) return;
  if (!(std::isfinite(new_scale) && new_scale > 0)) {
    fail("update", "the new scale must be a positive finite number, got " + std::to_string(new_scale) + ".");
  }
  scale_ = static_cast<float>(new_scale);
  unscaled_.clear();
  unscaled_parameters_.clear();
  stepped_.clear();
}

double GradScaler::get_scale() const noexcept { return kwargs_.enabled ? static_cast<double>(scale_) : 1.0; }

bool GradScaler::found_inf() const noexcept {
  for (const auto& record : unscaled_) {
    if (record.found_inf) return true;
  }
  return false;
}

GradScalerState GradScaler::state() const {
  if (!kwargs_.enabled) fail("state", "the scaler is disabled and has no state to save.");
  return GradScalerState{.scale = scale_,
                         .growth_tracker = growth_tracker_,
                         .growth_factor = kwargs_.growth_factor,
                         .backoff_factor = kwargs_.backoff_factor,
                         .growth_interval = kwargs_.growth_interval};
}

void GradScaler::load_state(const GradScalerState& state) {
  if (!kwargs_.enabled) return;
  GradScalerKwargs next = kwargs_;
  next.init_scale = state.scale;
  next.growth_factor = state.growth_factor;
  next.backoff_factor = state.backoff_factor;
  next.growth_interval = state.growth_interval;
  check_kwargs(next);
  if (state.growth_tracker < 0) fail("load_state", "_growth_tracker must be >= 0.");
  kwargs_.growth_factor = next.growth_factor;
  kwargs_.backoff_factor = next.backoff_factor;
  kwargs_.growth_interval = next.growth_interval;
  scale_ = state.scale;
  growth_tracker_ = state.growth_tracker;
}

c10::IValue GradScaler::state_dict() const {
  if (!kwargs_.enabled) return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
  return state().to_ivalue();
}

void GradScaler::load_state_dict(const c10::IValue& state_dict) {
  if (!kwargs_.enabled) return;
  if (state_dict.isGenericDict() && state_dict.toGenericDict().empty()) {
    fail("load_state_dict",
         "the state dict is empty, probably saved from a disabled GradScaler. Enable the saving scaler or do "
         "not load its state.");
  }
  load_state(GradScalerState::from_ivalue(state_dict));
}

}  // namespace accelerate
