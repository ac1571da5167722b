// Scoped automatic mixed precision over ATen's autocast (seeds:
// AutocastKwargs, Accelerator.autocast). While an AutocastGuard lives, the
// eligible operations of this thread (matmul, linear, convolutions, …) run
// in the lower precision and the others stay in fp32, exactly as under
// torch.autocast. The previous autocast state of the thread (enabled flag,
// dtype, weight-cache flag) comes back when the guard dies, so guards nest:
//
//   accelerate::AutocastGuard outer(c10::DeviceType::CPU, c10::kBFloat16);
//   {
//     accelerate::AutocastGuard inner(c10::DeviceType::CPU, c10::kBFloat16, {.enabled = false});
//     ...                                   // fp32 here
//   }                                       // bf16 again
//
// Supported: CPU with bfloat16 (and float16 with LibTorch 2.5 or newer,
// is_cpu_fp16_autocast_available()); CUDA with float16 or bfloat16. Anything else
// throws ConfigError. Autocast state is per thread: a guard affects only the
// thread that created it and must die on that thread.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <optional>

#include "accelerate/runtime/mixed_precision.hpp"

namespace accelerate {

/// Seeds' AutocastKwargs: field names and defaults kept.
struct AutocastKwargs {
  /// False makes the guard switch autocast off for its scope (useful inside
  /// an enabled region, e.g. for a loss that must run in fp32).
  bool enabled = true;
  /// Cache the low-precision copies of fp32 weights inside the region
  /// (torch.autocast's cache_enabled). Unset: keep the current setting
  /// (LibTorch's default is on).
  std::optional<bool> cache_enabled;
};

class [[nodiscard]] AutocastGuard {
 public:
  /// Enters autocast for `device_type` with `dtype` (ConfigError for an
  /// unsupported pair, even when kwargs.enabled is false, so a bad
  /// configuration is found on the first run and not on the first fp16 one).
  AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, const AutocastKwargs& kwargs = {});
  /// Restores the thread's previous autocast state; leaving the outermost
  /// region also empties the weight cache.
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;
  AutocastGuard(AutocastGuard&&) = delete;
  AutocastGuard& operator=(AutocastGuard&&) = delete;

 private:
  c10::DeviceType device_type_;
  bool previous_enabled_;
  c10::ScalarType previous_dtype_;
  bool previous_cache_enabled_;
};

/// Whether autocast is on for `device_type` (CPU or CUDA) on this thread.
bool is_autocast_enabled(c10::DeviceType device_type);
/// The autocast dtype of `device_type` on this thread (set even when disabled).
c10::ScalarType autocast_dtype(c10::DeviceType device_type);
/// Whether autocast caches casted weights on this thread.
bool is_autocast_cache_enabled();

/// The autocast dtype of a mixed-precision mode (kHalf, kBFloat16), or
/// nullopt for MixedPrecision::No.
std::optional<c10::ScalarType> autocast_dtype_of(MixedPrecision mode) noexcept;

}  // namespace accelerate
