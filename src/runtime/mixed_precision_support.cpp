// Whether a mixed-precision mode runs on a device. Apart from the parsing in
// mixed_precision.cpp because the answer depends on the LibTorch version
// (float16 CPU autocast), which that file, shared with the parser fuzzers,
// must not link.
#include "accelerate/runtime/mixed_precision.hpp"

#include <string>

#include "accelerate/error.hpp"
#include "accelerate/runtime/availability.hpp"

namespace accelerate {

void check_mixed_precision_supported(MixedPrecision mode, const DeviceId& device) {
  if (mode == MixedPrecision::FP16 && device.is_cpu() && !is_cpu_fp16_autocast_available()) {
    throw ConfigError("mixed_precision: \"fp16\" on the CPU needs LibTorch 2.5 or newer (this is " + torch_version() +
                      ", whose CPU autocast is bfloat16 only), and this process runs on the CPU. Use \"bf16\", "
                      "\"no\", a GPU, or a newer LibTorch.");
  }
}

}  // namespace accelerate
