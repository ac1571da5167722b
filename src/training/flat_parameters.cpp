#include "accelerate/training/flat_parameters.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <string>
#include <utility>

#include "accelerate/error.hpp"
#include "training/distinct_parameters.hpp"
#include "training/flat_alias.hpp"

namespace accelerate {

namespace {

[[noreturn]] void flat_error(const std::string& what) { throw ConfigError("FlatParameters: " + what); }

// Whether `tensor` is exactly the contiguous range of `base` at `offset` with
// `like`'s sizes.
bool is_range_of(const at::Tensor& tensor, const at::Tensor& base, std::int64_t offset, const at::Tensor& like) {
  if (!tensor.defined() || !tensor.is_contiguous() || tensor.scalar_type() != base.scalar_type() ||
      tensor.device() != base.device() || tensor.sizes() != like.sizes()) {
    return false;
  }
  const auto* expected =
      static_cast<const char*>(base.data_ptr()) + offset * static_cast<std::int64_t>(base.element_size());
  return tensor.data_ptr() == expected;
}

void check_flattenable(const at::Tensor& parameter, std::size_t index) {
  const std::string which = "parameter " + std::to_string(index);
  if (!parameter.defined()) flat_error(which + " is undefined.");
  if (parameter.is_meta()) {
    flat_error(which + " is on the meta device (it has no values): load or initialise the model first.");
  }
  if (parameter.layout() != at::kStrided) flat_error(which + " is not a dense (strided) tensor.");
  if (!at::isFloatingType(parameter.scalar_type())) {
    flat_error(which + " has dtype " + std::string(c10::toString(parameter.scalar_type())) +
               "; only floating-point parameters are trained.");
  }
}

}  // namespace

FlatParameters::FlatParameters(const std::vector<at::Tensor>& parameters, bool link_gradients) {
  torch::NoGradGuard no_grad;
  const std::vector<at::Tensor> distinct = training_detail::distinct_tensors(parameters);
  for (std::size_t i = 0; i < distinct.size(); ++i) check_flattenable(distinct[i], i);
  listed_ = distinct;
  for (const at::Tensor& parameter : distinct) {
    Group* group = nullptr;
    for (Group& candidate : groups_) {
      const at::Tensor& first = candidate.parameters.front();
      if (first.scalar_type() == parameter.scalar_type() && first.device() == parameter.device()) group = &candidate;
    }
    if (group == nullptr) {
      group = &groups_.emplace_back();
      group->offsets.push_back(0);
    }
    group->parameters.push_back(parameter);
    group->offsets.push_back(group->offsets.back() + parameter.numel());
  }
  for (Group& group : groups_) {
    const auto options = group.parameters.front().options().requires_grad(false);
    group.values = at::empty({group.numel()}, options);
    group.grads = at::zeros({group.numel()}, options);
    for (std::size_t i = 0; i < group.parameters.size(); ++i) {
      at::Tensor& parameter = group.parameters[i];
      const std::int64_t offset = group.offsets[i];
      group.values.narrow(0, offset, parameter.numel()).copy_(parameter.detach().reshape({-1}));
      const at::Tensor old_grad = parameter.grad();
      parameter.set_data(training_detail::alias_of(group.values, offset, parameter.sizes()));
      if (!parameter.requires_grad() || (!link_gradients && !old_grad.defined())) continue;
      at::Tensor grad = training_detail::alias_of(group.grads, offset, parameter.sizes());
      if (old_grad.defined()) grad.copy_(old_grad);
      parameter.mutable_grad() = grad;
    }
  }
}

std::size_t FlatParameters::size() const {
  std::size_t count = 0;
  for (const Group& group : groups_) count += group.parameters.size();
  return count;
}

bool FlatParameters::holds(const at::Tensor& parameter) const {
  for (const Group& group : groups_) {
    for (const at::Tensor& held : group.parameters) {
      if (held.unsafeGetTensorImpl() == parameter.unsafeGetTensorImpl()) return true;
    }
  }
  return false;
}

bool FlatParameters::built_from(const std::vector<at::Tensor>& parameters) const {
  if (parameters.size() != listed_.size()) return false;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (parameters[i].unsafeGetTensorImpl() != listed_[i].unsafeGetTensorImpl()) return false;
  }
  return true;
}

void FlatParameters::zero_grad() {
  torch::NoGradGuard no_grad;
  for (Group& group : groups_) {
    group.grads.zero_();
    for (std::size_t i = 0; i < group.parameters.size(); ++i) {
      at::Tensor& parameter = group.parameters[i];
      if (!parameter.grad().defined()) continue;
      if (!is_range_of(parameter.grad(), group.grads, group.offsets[i], parameter)) {
        parameter.mutable_grad() = training_detail::alias_of(group.grads, group.offsets[i], parameter.sizes());
      }
    }
  }
}

std::size_t FlatParameters::link_gradients() {
  torch::NoGradGuard no_grad;
  std::size_t linked = 0;
  for (Group& group : groups_) {
    for (std::size_t i = 0; i < group.parameters.size(); ++i) {
      at::Tensor& parameter = group.parameters[i];
      const at::Tensor& grad = parameter.grad();
      if (!grad.defined() || is_range_of(grad, group.grads, group.offsets[i], parameter)) continue;
      if (grad.layout() != at::kStrided || grad.sizes() != parameter.sizes()) {
        flat_error("the gradient of parameter " + std::to_string(i) +
                   " is not a dense tensor of the parameter's shape; flat storage needs dense gradients.");
      }
      at::Tensor range = training_detail::alias_of(group.grads, group.offsets[i], parameter.sizes());
      range.copy_(grad);
      parameter.mutable_grad() = range;
      ++linked;
    }
  }
  return linked;
}

bool FlatParameters::still_fits() const {
  for (const Group& group : groups_) {
    for (std::size_t i = 0; i < group.parameters.size(); ++i) {
      const at::Tensor& parameter = group.parameters[i];
      if (parameter.numel() != group.offsets[i + 1] - group.offsets[i] ||
          parameter.scalar_type() != group.values.scalar_type() || parameter.device() != group.values.device()) {
        return false;
      }
    }
  }
  return true;
}

std::size_t FlatParameters::keep_aliased() {
  torch::NoGradGuard no_grad;
  std::size_t moved = 0;
  for (Group& group : groups_) {
    for (std::size_t i = 0; i < group.parameters.size(); ++i) {
      at::Tensor& parameter = group.parameters[i];
      if (is_range_of(parameter, group.values, group.offsets[i], parameter)) continue;
      const std::int64_t numel = group.offsets[i + 1] - group.offsets[i];
      if (parameter.numel() != numel || parameter.scalar_type() != group.values.scalar_type() ||
          parameter.device() != group.values.device()) {
        flat_error("parameter " + std::to_string(i) + " of the " +
                   std::string(c10::toString(group.values.scalar_type())) + " group on " + group.values.device().str() +
                   " changed size, dtype or device after it was made a " + "view of flat storage (now " +
                   std::to_string(parameter.numel()) + " elements of " +
                   std::string(c10::toString(parameter.scalar_type())) + " on " + parameter.device().str() +
                   "). Resize, cast or move the model before building the fused optimizer.");
      }
      group.values.narrow(0, group.offsets[i], numel).copy_(parameter.detach().reshape({-1}));
      parameter.set_data(training_detail::alias_of(group.values, group.offsets[i], parameter.sizes()));
      ++moved;
    }
  }
  return moved;
}

}  // namespace accelerate
