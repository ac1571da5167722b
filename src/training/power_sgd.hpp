// PowerSGD gradient compression (Vogels, Karimireddy, Jaggi, "PowerSGD:
// Practical Low-Rank Gradient Compression for Distributed Optimization",
// NeurIPS 2019), the engine behind DDPCommunicationHookType::POWER_SGD and
// BATCHED_POWER_SGD. Semantics and option names are PyTorch's
// PowerSGDState / powerSGD_hook / batched_powerSGD_hook.
//
// Per bucket and synchronising step, on pre-averaged gradients (the reducer
// divides by the world size first):
//   start   X = gradients + error (error feedback); P = X Q per matrix
//           (Q random, or last step's with warm start); post the all-reduce
//           of every P and of the tensors left uncompressed
//   finish  orthonormalise P; Q = Xᵀ P; all-reduce Q; the gradient becomes
//           P Qᵀ, the same on every rank; error = X - result / world size
// POWER_SGD compresses each gradient of 2 or more dimensions as a
// shape[0] × rest matrix where that pays (min_compression_rate); vectors
// travel uncompressed. BATCHED_POWER_SGD treats the whole bucket as one
// square matrix, zero-padded.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/comm/work.hpp"

namespace accelerate {
class ProcessGroup;
}

namespace accelerate::detail {

/// PowerSGDState's options, with PyTorch's defaults.
struct PowerSgdOptions {
  bool batched = false;
  int64_t matrix_approximation_rank = 1;
  int64_t start_powerSGD_iter = 1000;
  double min_compression_rate = 2.0;
  bool use_error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0.0;
  uint64_t random_seed = 0;
};

/// Reads DistributedDataParallelKwargs::comm_state_option. Returns an empty
/// string and fills `options`, or a description of the first bad entry
/// (unknown key, unparsable or out-of-range value).
std::string parse_power_sgd_options(const std::map<std::string, std::string>& entries, PowerSgdOptions& options);

class PowerSgdCompressor {
 public:
  /// `buckets[b]`: bucket b's flat gradient buffer; `views[b]`: its
  /// parameters' gradients, as views of that buffer in order. `wire`: the
  /// dtype the messages travel in (comm_wrapper), if any.
  PowerSgdCompressor(PowerSgdOptions options, const std::vector<at::Tensor>& buckets,
                     const std::vector<std::vector<at::Tensor>>& views, std::optional<c10::ScalarType> wire,
                     int world_size);
  ~PowerSgdCompressor();
  PowerSgdCompressor(const PowerSgdCompressor&) = delete;
  PowerSgdCompressor& operator=(const PowerSgdCompressor&) = delete;

  /// Whether this step compresses (start_powerSGD_iter steps have passed).
  [[nodiscard]] bool active() const noexcept { return iteration_ >= options_.start_powerSGD_iter; }
  /// Posts bucket b's first round; returns the bytes it and finish() put on the wire.
  int64_t start(std::size_t bucket, ProcessGroup& group);
  /// Completes bucket b: its buffer then holds the averaged approximation.
  void finish(std::size_t bucket, ProcessGroup& group);
  /// A synchronising step ended (counts towards start_powerSGD_iter).
  void end_step() noexcept { ++iteration_; }

 private:
  struct Matrix;
  struct Bucket;
  void all_reduce_now(at::Tensor& tensor, at::Tensor& wire, ProcessGroup& group) const;

  PowerSgdOptions options_;
  std::optional<c10::ScalarType> wire_;
  double inverse_world_ = 1.0;
  int64_t iteration_ = 0;
  at::Generator generator_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
};

}  // namespace accelerate::detail
