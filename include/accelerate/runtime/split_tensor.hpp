// split_between_processes for tensors: the LibTorch half of process_control.hpp,
// kept apart so code that does not use tensors does not parse LibTorch.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "accelerate/runtime/state.hpp"

namespace accelerate {

/// This process's rows (dimension 0) of `inputs`, split as for vectors: a
/// process past the end of short inputs gets the last row. The result is a
/// view of `inputs` unless padding was applied. With `apply_padding`, short
/// slices repeat their last row up to the longest slice's length. A 0-d
/// tensor cannot be split: ConfigError.
at::Tensor split_between_processes(const State& state, const at::Tensor& inputs, bool apply_padding = false);

/// Every tensor of `inputs` split as above, with the same rows for each
/// (Accelerate's split of a dict of tensors). Every tensor must have the same
/// first dimension: ConfigError naming the keys otherwise.
std::map<std::string, at::Tensor> split_between_processes(const State& state,
                                                          const std::map<std::string, at::Tensor>& inputs,
                                                          bool apply_padding = false);

}  // namespace accelerate
