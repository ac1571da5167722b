// Capturing, restoring and synchronising random-number-generator states
// (seeds: accelerate.utils.synchronize_rng_state(s), RNGType; the
// random_states part of a checkpoint).
//
// The rng types, by name as in Accelerate's rng_types:
//   "torch"      LibTorch's default CPU generator
//   "cuda"       the default generator of every visible GPU
//   "generator"  a generator the program passes in (e.g. a sampler's)
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelerate {

class ProcessGroup;

enum class RngType { Torch, Cuda, Generator };

/// "torch", "cuda" or "generator" (exact, lower case, as in Accelerate).
/// Anything else throws ConfigError listing the valid names.
RngType parse_rng_type(std::string_view name);
std::string_view to_string(RngType type) noexcept;

/// The states of this process's generators, as uint8 CPU tensors (the
/// format of torch.get_rng_state / Generator::get_state).
struct RngStates {
  /// The default CPU generator.
  at::Tensor torch;
  /// One per visible GPU, in device order; empty without CUDA.
  std::vector<at::Tensor> cuda;
  /// The generator passed to capture_rng_states, if any.
  std::optional<at::Tensor> generator;

  /// A dict with Accelerate's random_states keys: "torch_manual_seed",
  /// "torch_cuda_manual_seed" (a list), and "generator" when present.
  [[nodiscard]] c10::IValue to_ivalue() const;
  /// The inverse of to_ivalue; ConfigError names a missing or mistyped key.
  static RngStates from_ivalue(const c10::IValue& value);
};

/// Copies of the current states (the generators keep running).
RngStates capture_rng_states(const at::Generator* generator = nullptr);

/// Puts the states back. The CUDA states are restored only when there are
/// as many visible GPUs as states (ConfigError otherwise, naming both
/// counts; an empty list is accepted anywhere, e.g. a checkpoint written
/// without GPUs). The generator state needs `generator`, and a generator of
/// the same kind (ConfigError otherwise).
void restore_rng_states(const RngStates& states, at::Generator* generator = nullptr);

/// Makes the listed generators of every rank of `group` equal to rank 0's
/// by broadcasting rank 0's states. Collective over `group`.
///
/// Before anything is sent, the ranks agree (one small all-reduce) that
/// every name is valid, that they all listed the same types, and that
/// "generator" comes with a generator of the same state size everywhere;
/// otherwise every rank throws ConfigError with the reason. "cuda" is
/// skipped on every rank unless every rank sees CUDA with the same number
/// of GPUs (a CPU-only run lists "cuda" harmlessly).
void synchronize_rng_states(const std::vector<std::string>& rng_types, ProcessGroup& group,
                            at::Generator* generator = nullptr);
/// One type (seeds: synchronize_rng_state).
void synchronize_rng_state(RngType rng_type, ProcessGroup& group, at::Generator* generator = nullptr);

}  // namespace accelerate
