// ATen's autocast state API changed in LibTorch 2.4: per-device functions
// (is_cpu_enabled, set_autocast_cpu_dtype, …) became device-type parameters
// (is_autocast_enabled(device), set_autocast_dtype(device, dtype)), and the
// old names were deprecated. The two small shims below hide the difference.
#include "accelerate/amp/autocast.hpp"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <string>

#include "accelerate/error.hpp"
#include "accelerate/runtime/availability.hpp"

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define ACCELERATE_AUTOCAST_DEVICE_API 1
#else
#define ACCELERATE_AUTOCAST_DEVICE_API 0
#endif

namespace accelerate {

namespace {

void check_pair(c10::DeviceType device_type, c10::ScalarType dtype) {
  const bool cpu_half = dtype == c10::kHalf && is_cpu_fp16_autocast_available();
  const bool supported = (device_type == c10::DeviceType::CPU && (dtype == c10::kBFloat16 || cpu_half)) ||
                         (device_type == c10::DeviceType::CUDA && (dtype == c10::kHalf || dtype == c10::kBFloat16));
  if (supported) return;
  throw ConfigError("AutocastGuard: autocast to " + std::string(c10::toString(dtype)) + " on " +
                    c10::DeviceTypeName(device_type, /*lower_case=*/true) + " is not supported with LibTorch " +
                    torch_version() +
                    ". Use bfloat16 on cpu (float16 too from LibTorch 2.5), or float16/bfloat16 on cuda.");
}

void check_device(c10::DeviceType device_type, const char* call) {
  if (device_type == c10::DeviceType::CPU || device_type == c10::DeviceType::CUDA) return;
  throw ConfigError(std::string(call) + ": device type " + c10::DeviceTypeName(device_type, /*lower_case=*/true) +
                    " has no autocast here; use cpu or cuda.");
}

void set_enabled(c10::DeviceType device_type, bool enabled) {
#if ACCELERATE_AUTOCAST_DEVICE_API
  at::autocast::set_autocast_enabled(device_type, enabled);
#else
  if (device_type == c10::DeviceType::CPU) {
    at::autocast::set_cpu_enabled(enabled);
  } else {
    at::autocast::set_enabled(enabled);
  }
#endif
}

void set_dtype(c10::DeviceType device_type, c10::ScalarType dtype) {
#if ACCELERATE_AUTOCAST_DEVICE_API
  at::autocast::set_autocast_dtype(device_type, dtype);
#else
  if (device_type == c10::DeviceType::CPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
#endif
}

}  // namespace

bool is_autocast_enabled(c10::DeviceType device_type) {
  check_device(device_type, "is_autocast_enabled");
#if ACCELERATE_AUTOCAST_DEVICE_API
  return at::autocast::is_autocast_enabled(device_type);
#else
  return device_type == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

c10::ScalarType autocast_dtype(c10::DeviceType device_type) {
  check_device(device_type, "autocast_dtype");
#if ACCELERATE_AUTOCAST_DEVICE_API
  return at::autocast::get_autocast_dtype(device_type);
#else
  return device_type == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype()
                                             : at::autocast::get_autocast_gpu_dtype();
#endif
}

bool is_autocast_cache_enabled() { return at::autocast::is_autocast_cache_enabled(); }

std::optional<c10::ScalarType> autocast_dtype_of(MixedPrecision mode) noexcept {
  switch (mode) {
    case MixedPrecision::FP16: return c10::kHalf;
    case MixedPrecision::BF16: return c10::kBFloat16;
    case MixedPrecision::No: break;
  }
  return std::nullopt;
}

AutocastGuard::AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, const AutocastKwargs& kwargs)
    : device_type_(device_type), previous_enabled_(false), previous_dtype_(c10::kFloat), previous_cache_enabled_(true) {
  check_device(device_type, "AutocastGuard");
  check_pair(device_type, dtype);
  previous_enabled_ = is_autocast_enabled(device_type);
  previous_dtype_ = autocast_dtype(device_type);
  previous_cache_enabled_ = at::autocast::is_autocast_cache_enabled();
  // As torch.autocast: the dtype and cache flag are set, the nesting depth
  // counted, whether this region enables or disables autocast.
  set_dtype(device_type, dtype);
  set_enabled(device_type, kwargs.enabled);
  if (kwargs.cache_enabled.has_value()) at::autocast::set_autocast_cache_enabled(*kwargs.cache_enabled);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  // The weight cache holds casts of this region's weights; drop it when the
  // outermost region ends so that updated weights are re-cast next time.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_enabled(device_type_, previous_enabled_);
  set_dtype(device_type_, previous_dtype_);
  at::autocast::set_autocast_cache_enabled(previous_cache_enabled_);
}

}  // namespace accelerate
