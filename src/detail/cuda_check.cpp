#include "detail/cuda_check.hpp"

#include <string>

#include "accelerate/error.hpp"

namespace accelerate::detail {

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  // Clear a non-sticky error so the next, unrelated call does not report it again.
  cudaGetLastError();
  std::string message = std::string(call) + " failed (" + file + ":" + std::to_string(line) +
                        "): " + cudaGetErrorName(code) + ": " + cudaGetErrorString(code) + ".";
  if (code == cudaErrorNoDevice || code == cudaErrorInsufficientDriver || code == cudaErrorInvalidDevice) {
    message +=
        " No usable GPU is visible to this rank: check CUDA_VISIBLE_DEVICES and the job's GPU "
        "request (e.g. srun --gpus-per-task=1), or run on the CPU (ACCELERATE_USE_CPU=1).";
  } else {
    message += " See the CUDA error above; 'accelerate-hpc env' shows the driver and runtime versions.";
  }
  throw CudaError(message, static_cast<int>(code));
}

}  // namespace accelerate::detail
