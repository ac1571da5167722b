#include "accelerate/modeling/module_tensors.hpp"

#include <c10/util/StringUtil.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/utils.h>

#include <mutex>

#include "accelerate/error.hpp"
#include "modeling/module_walk.hpp"

namespace accelerate {
namespace {

[[noreturn]] void tensor_error(const std::string& tensor_name, const std::string& what) {
  throw ConfigError("set_module_tensor_to_device('" + tensor_name + "'): " + what);
}

// The registered tensor itself (a handle on the same tensor as the module's
// member field), or an undefined tensor.
at::Tensor registered_tensor(const torch::nn::Module& owner, const std::string& leaf) {
  for (const auto& item : owner.named_parameters(/*recurse=*/false)) {
    if (item.key() == leaf) return item.value();
  }
  for (const auto& item : owner.named_buffers(/*recurse=*/false)) {
    if (item.key() == leaf) return item.value();
  }
  return {};
}

// Gives `target` the data of `next`, keeping the tensor itself (its identity,
// autograd metadata and requires_grad). set_data refuses a change between the
// meta device and a device with memory (their tensors are of different
// dispatch types); for that change alone, between plain strided tensors, the
// tensor's metadata is copied over directly, after the steps set_data takes
// on a change of device: a gradient accumulator made for the old device is
// dropped, so that the next backward makes one for the new. The gradient
// goes too: one on the old device fits neither.
void replace_data(at::Tensor& target, const at::Tensor& next, const std::string& tensor_name) {
  const bool across_meta = target.is_meta() != next.is_meta();
  const auto plain = [](const at::Tensor& t) { return t.layout() == c10::kStrided && !t.is_quantized(); };
  if (!across_meta || !plain(target) || !plain(next)) {
    target.set_data(next);  // LibTorch's own checks and errors for everything else
    return;
  }
  if (target.requires_grad() && !(next.is_floating_point() || next.is_complex())) {
    tensor_error(tensor_name, std::string("the tensor requires grad, but its value is ") +
                                  c10::toString(next.scalar_type()) + "; only floating-point tensors can");
  }
  if (auto* meta = torch::autograd::impl::get_autograd_meta(target)) {
    const std::lock_guard<std::mutex> lock(meta->mutex_);
    meta->grad_accumulator_.reset();
  }
  target.mutable_grad() = at::Tensor();
  target.unsafeGetTensorImpl()->shallow_copy_from(next.getIntrusivePtr());
}

}  // namespace

void set_module_tensor_to_device(torch::nn::Module& module, const std::string& tensor_name, const c10::Device& device,
                                 const std::optional<at::Tensor>& value, std::optional<c10::ScalarType> dtype) {
  const auto dot = tensor_name.rfind('.');
  const std::string owner_name = dot == std::string::npos ? "" : tensor_name.substr(0, dot);
  const std::string leaf = dot == std::string::npos ? tensor_name : tensor_name.substr(dot + 1);
  const torch::nn::Module* owner = modeling::find_submodule(module, owner_name);
  if (owner == nullptr) tensor_error(tensor_name, "the module has no submodule '" + owner_name + "'");
  at::Tensor target = registered_tensor(*owner, leaf);
  if (!target.defined()) {
    tensor_error(tensor_name, "'" + (owner_name.empty() ? std::string("the module") : owner_name) +
                                  "' has no parameter or buffer named '" + leaf + "'");
  }
  at::Tensor next;
  {
    torch::NoGradGuard no_grad;
    if (value) {
      if (value->sizes() != target.sizes()) {
        tensor_error(tensor_name, "the value has shape " + c10::str(value->sizes()) + ", the tensor " +
                                      c10::str(target.sizes()) + "; a checkpoint of another model?");
      }
      next = value->detach();
      if (!dtype) {
        next = next.to(target.scalar_type());  // as load_state_dict converts
      } else if (next.is_floating_point() || next.is_complex()) {
        next = next.to(*dtype);
      }
      next = next.to(device);
    } else {
      if (target.is_meta() && device.type() != c10::kMeta) {
        tensor_error(tensor_name, "the tensor is on the meta device and has no values; give a value to put on " +
                                      device.str() + " (a checkpoint's tensor)");
      }
      next = target.detach().to(device);
      if (dtype && (next.is_floating_point() || next.is_complex())) next = next.to(*dtype);
    }
  }
  replace_data(target, next, tensor_name);  // the same tensor, new data: members, registry and ties all see it
}

}  // namespace accelerate
