#include "accelerate/runtime/device_memory.hpp"

#include "accelerate/config.hpp"

#if ACCELERATE_TORCH_CUDA_STREAMS
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace accelerate {

void clear_device_cache() noexcept {
#if ACCELERATE_TORCH_CUDA_STREAMS
  try {
    if (c10::cuda::device_count() > 0) c10::cuda::CUDACachingAllocator::emptyCache();
  } catch (...) {
    // Called on error paths (after an out-of-memory error): emptying a cache
    // is an optimisation, never a reason for a second failure.
  }
#endif
}

std::uint64_t device_memory_reserved([[maybe_unused]] int device) noexcept {
#if ACCELERATE_TORCH_CUDA_STREAMS
  try {
    if (device < 0 || device >= c10::cuda::device_count()) return 0;
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    // Entry 0 is the aggregate over pool types (StatType::AGGREGATE, whose
    // namespace moved between LibTorch releases).
    return static_cast<std::uint64_t>(stats.reserved_bytes[0].current);
  } catch (...) {
    return 0;
  }
#else
  return 0;
#endif
}

}  // namespace accelerate
