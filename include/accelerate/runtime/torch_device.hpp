// The one place a DeviceId becomes LibTorch's c10::Device.
#pragma once

#include <c10/core/Device.h>

#include "accelerate/runtime/device_id.hpp"

namespace accelerate {

[[nodiscard]] inline c10::Device torch_device(const DeviceId& device) {
  if (device.is_cpu()) return c10::Device(c10::DeviceType::CPU);
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device.index()));
}

}  // namespace accelerate
