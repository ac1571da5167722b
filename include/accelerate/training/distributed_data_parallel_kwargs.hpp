// DistributedDataParallelKwargs: how prepare(model) builds its distributed
// model (Accelerate's kwargs handler of the same name; same fields, same
// defaults). A plain struct for designated initialisers:
//
//   accelerate::DistributedDataParallelKwargs kwargs{.bucket_cap_mb = 4,
//                                                    .find_unused_parameters = true};
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace accelerate {

/// Accelerate's DDPCommunicationHookType (PyTorch's built-in DDP hooks).
enum class DDPCommunicationHookType {
  NO,                 ///< all-reduce the gradients in their own dtype
  FP16,               ///< cast each bucket to float16, all-reduce, cast back
  BF16,               ///< cast each bucket to bfloat16, all-reduce, cast back
  POWER_SGD,          ///< low-rank compression of each gradient matrix (comm_state_option)
  BATCHED_POWER_SGD,  ///< low-rank compression of each bucket as one square matrix
};

constexpr std::string_view to_string(DDPCommunicationHookType type) {
  switch (type) {
    case DDPCommunicationHookType::NO: return "no";
    case DDPCommunicationHookType::FP16: return "fp16";
    case DDPCommunicationHookType::BF16: return "bf16";
    case DDPCommunicationHookType::POWER_SGD: return "power_sgd";
    case DDPCommunicationHookType::BATCHED_POWER_SGD: return "batched_power_sgd";
  }
  return "?";
}

struct DistributedDataParallelKwargs {
  /// Batch dimension for splitting inputs across devices of one process.
  /// Each process drives one device here, so inputs are never split; kept for
  /// source compatibility.
  int dim = 0;
  /// Broadcast the module's buffers (batch-norm statistics, …) from rank 0
  /// at every forward, so all ranks run with rank 0's buffers.
  bool broadcast_buffers = true;
  /// Gradient bucket size in MiB. Fractions are accepted (0.25 = 256 KiB);
  /// 0 puts every parameter in its own bucket.
  double bucket_cap_mb = 25;
  /// Parameters that got no gradient in a backward count as zero gradients,
  /// so their buckets still reduce. Off: a parameter without gradient is an
  /// error on every rank at the end of that backward.
  bool find_unused_parameters = false;
  /// Deprecated in PyTorch; accepted and ignored.
  bool check_reduction = false;
  /// Make each parameter's .grad a view into its bucket: saves one copy in
  /// and one copy out per step, and the bucket memory. On by default, unlike
  /// Accelerate's and PyTorch's false: measured faster (docs/performance.md),
  /// and .grad behaves the same (docs/distributed-model.md).
  bool gradient_as_bucket_view = true;
  /// The set of parameters used does not change between iterations. The
  /// buckets are static in any case; accepted for compatibility.
  bool static_graph = false;
  /// Gradient compression on the wire.
  DDPCommunicationHookType comm_hook = DDPCommunicationHookType::NO;
  /// FP16 or BF16 around a PowerSGD hook: its messages (P, Q and the
  /// uncompressed vectors; whole buckets before start_powerSGD_iter) travel
  /// in that type. Without PowerSGD a wrapper alone compresses like
  /// comm_hook; FP16/BF16 hook and a different wrapper is a ConfigError.
  DDPCommunicationHookType comm_wrapper = DDPCommunicationHookType::NO;
  /// PowerSGD's state options (PyTorch's PowerSGDState; values as text):
  /// matrix_approximation_rank (1), start_powerSGD_iter (1000; synchronising
  /// steps reduced exactly before compression starts), min_compression_rate
  /// (2), use_error_feedback (true), warm_start (true),
  /// orthogonalization_epsilon (0), random_seed (0). Unknown keys, bad
  /// values, or options without a PowerSGD hook are a ConfigError.
  std::map<std::string, std::string> comm_state_option{};
};

}  // namespace accelerate
