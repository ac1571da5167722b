// Moving or replacing one named tensor of a module in place (Accelerate's
// set_module_tensor_to_device). In LibTorch a module holds its tensors in
// member fields as well as in its registry, so the tensor is changed where it
// lives, not swapped for a new one: the member, the registry and every module
// that shares the tensor (tied weights) see the change, and ties stay tied.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace accelerate {

/// Puts the parameter or buffer `tensor_name` ("layers.0.proj.weight") of
/// `module` on `device`, with `value`'s elements where given. A value keeps
/// the tensor's dtype unless `dtype` is given; `dtype` casts floating-point
/// values only (integers and bools are not converted), with or without a
/// value. The tensor stays a parameter (or a buffer), with its requires_grad.
/// To the meta device the tensor's memory is released; from it, a value is
/// needed (a meta tensor has none). ConfigError for a name the module does not
/// have, a value of another shape, or a meta tensor moved without a value.
void set_module_tensor_to_device(torch::nn::Module& module, const std::string& tensor_name, const c10::Device& device,
                                 const std::optional<at::Tensor>& value = std::nullopt,
                                 std::optional<c10::ScalarType> dtype = std::nullopt);

}  // namespace accelerate
