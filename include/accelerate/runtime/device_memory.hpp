// The device memory that LibTorch's caching allocator holds (seeds:
// accelerate.utils.clear_device_cache). Freed CUDA tensors stay reserved by
// the allocator for reuse; a batch-size search or a phase change wants them
// given back to the driver so the next attempt starts from an empty cache.
//
// Both functions work only when this build links LibTorch's CUDA runtime
// (config::torch_cuda_streams, a CUDA LibTorch such as the PyPI wheel's);
// elsewhere there is no device cache and they do nothing / report 0.
#pragma once

#include <cstdint>

namespace accelerate {

/// Returns the unused blocks of LibTorch's CUDA caching allocator to the
/// driver, on every visible GPU. A no-op without CUDA or without GPUs.
void clear_device_cache() noexcept;

/// Drops the caller's references and gives the freed memory back (seeds:
/// accelerate.utils.release_memory): every argument is reset to its empty
/// state (an undefined tensor, a null pointer, an empty container), then
/// clear_device_cache() runs. Memory is freed only where these were the last
/// references; a model still held elsewhere keeps its weights.
template <class... Objects>
void release_memory(Objects&... objects) {
  ((objects = Objects{}), ...);
  clear_device_cache();
}

/// Bytes the CUDA caching allocator currently reserves on `device` (live
/// tensors plus cached free blocks); 0 without CUDA or for a device that
/// does not exist.
[[nodiscard]] std::uint64_t device_memory_reserved(int device = 0) noexcept;

}  // namespace accelerate
