#include "runtime/device_probe.hpp"

#include <torch/cuda.h>

#include "accelerate/config.hpp"
#if ACCELERATE_HAVE_CUDA
#include "detail/cuda_check.hpp"
#endif

namespace accelerate::detail {

int visible_cuda_devices() {
  // A CUDA device LibTorch cannot address is of no use to a training loop,
  // so LibTorch decides (its CPU-only builds always answer 0).
  return static_cast<int>(torch::cuda::device_count());
}

int cuda_compute_capability_major([[maybe_unused]] int device) {
#if ACCELERATE_HAVE_CUDA
  int major = 0;
  ACCELERATE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major;
#else
  return 0;
#endif
}

void bind_cuda_device([[maybe_unused]] int index) {
#if ACCELERATE_HAVE_CUDA
  ACCELERATE_CUDA_CHECK(cudaSetDevice(index));
#endif
}

}  // namespace accelerate::detail
