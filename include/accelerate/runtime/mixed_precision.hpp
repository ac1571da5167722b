// Mixed-precision modes (seeds: Accelerator's mixed_precision, PrecisionType):
// "no", "fp16", "bf16". Plain data; no LibTorch. A setting of the run, read
// by the configuration file and the State, so it lives in runtime; amp/
// implements the modes (autocast, GradScaler).
#pragma once

#include <string>
#include <string_view>

#include "accelerate/runtime/device_id.hpp"

namespace accelerate {

enum class MixedPrecision {
  No,    ///< full precision (fp32)
  FP16,  ///< float16 autocast plus a GradScaler (CUDA only)
  BF16,  ///< bfloat16 autocast, no scaler (CPU and CUDA)
};

/// "no", "fp16" or "bf16" (any case, surrounding blanks ignored). Anything
/// else throws ConfigError naming the value and the accepted ones.
MixedPrecision parse_mixed_precision(std::string_view text);

/// "no", "fp16" or "bf16".
std::string_view to_string(MixedPrecision mode) noexcept;

/// Checks that `mode` can run on `device` (a DeviceId, or its text: "cpu",
/// "cuda", "cuda:1"; other text throws ConfigError as it is parsed). fp16 on the CPU needs float16 CPU autocast (LibTorch 2.5 or
/// newer, is_cpu_fp16_autocast_available()); with an older LibTorch it throws
/// ConfigError naming the version and bf16. Accelerate trains fp16 on a CPU
/// silently in fp32; here the request does what it says or fails.
void check_mixed_precision_supported(MixedPrecision mode, const DeviceId& device);

}  // namespace accelerate
