// The parser harnesses link the configuration-file reader without LibTorch;
// its only use of the device is write_basic_config's "use_cpu", which the
// harnesses never call. This stands in for runtime/availability.cpp.
#include "accelerate/runtime/availability.hpp"

namespace accelerate {
bool is_cuda_available() { return false; }
}  // namespace accelerate
