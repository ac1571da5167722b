// ACCELERATE_CUDA_CHECK: a failed CUDA runtime call becomes a CudaError with
// the rank, the call, CUDA's error name and text, and a remedy. Compiled
// only when the CUDA feature is on.
#pragma once

#include <cuda_runtime_api.h>

namespace accelerate::detail {

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);

inline void check_cuda(cudaError_t code, const char* call, const char* file, int line) {
  if (code != cudaSuccess) [[unlikely]] {
    throw_cuda_error(code, call, file, line);
  }
}

}  // namespace accelerate::detail

#define ACCELERATE_CUDA_CHECK(expr) ::accelerate::detail::check_cuda((expr), #expr, __FILE__, __LINE__)
