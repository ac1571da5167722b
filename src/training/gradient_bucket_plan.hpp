// Assignment of parameters to gradient buckets: a pure function of the
// parameter list, so every rank (having checked that the lists agree)
// computes the same buckets in the same order.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

namespace accelerate::detail {

struct GradientSlotInfo {
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  int64_t numel = 0;
};

/// Buckets of parameter indices, in launch order.
///
/// Parameters are taken in reverse registration order (backward produces the
/// last layers' gradients first). Each (dtype, device) pair fills its own
/// open bucket; a bucket is closed when the next parameter would take it past
/// its cap: `first_cap_bytes` for the first bucket of each pair, `cap_bytes`
/// after. A parameter larger than the cap gets a bucket of its own. Buckets
/// are ordered by the reverse position of their first parameter, which is the
/// order their gradients are expected to become ready in.
std::vector<std::vector<std::size_t>> plan_gradient_buckets(const std::vector<GradientSlotInfo>& slots,
                                                            int64_t first_cap_bytes, int64_t cap_bytes);

}  // namespace accelerate::detail
