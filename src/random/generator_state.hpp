// Reading and writing generator states under the generator's lock, shared
// by capture/restore and synchronisation. Private to the random module.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace accelerate::detail {

/// A copy of the generator's state (uint8 CPU tensor).
at::Tensor generator_state(const at::Generator& generator);

/// Sets the state; ConfigError (naming `call`) when `state` is not a uint8
/// tensor of the size this generator's state has.
void set_generator_state(at::Generator& generator, const at::Tensor& state, const char* call);

/// The default generator of GPU `index`.
at::Generator cuda_generator(int index);

/// GPUs LibTorch can use (0 without CUDA).
int visible_gpus();

}  // namespace accelerate::detail
