// split_between_processes for tensors: the LibTorch half of process_control.hpp,
// kept apart so code that does not use tensors does not parse LibTorch.
#pragma once

#include <ATen/core/Tensor.h>

#include "accelerate/runtime/state.hpp"

namespace accelerate {

/// This process's rows (dimension 0) of `inputs`, split as for vectors. The
/// result is a view of `inputs` unless padding was applied. With
/// `apply_padding`, short slices repeat their last row (or the last row of
/// `inputs` when empty) up to the longest slice's length. A 0-d tensor
/// cannot be split: ConfigError.
at::Tensor split_between_processes(const State& state, const at::Tensor& inputs, bool apply_padding = false);

}  // namespace accelerate
