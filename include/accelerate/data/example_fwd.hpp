// torch::data::Example declared, not defined. LibTorch defines it in
// <torch/data/example.h>, which includes <torch/types.h>: the whole tensor
// API, about as much to compile as <torch/torch.h>. The loaders' headers only
// name the type (a batch type, the parameters of functions defined in src/),
// so they declare it; a program that makes or reads examples includes
// <torch/data/example.h> (or <torch/torch.h>), as it must anyway to write a
// dataset of them.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch::data {
// LibTorch's definition adds the default arguments (both at::Tensor); a
// declaration may not repeat them, so the headers here spell them out.
template <typename Data, typename Target>
struct Example;
}  // namespace torch::data

namespace accelerate::detail {
/// torch::data::Example<>: data and target tensors.
using TensorExample = torch::data::Example<at::Tensor, at::Tensor>;
}  // namespace accelerate::detail
