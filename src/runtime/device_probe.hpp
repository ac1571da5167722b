// Which accelerator devices this rank can use. Kept apart from State so that
// State compiles without LibTorch or CUDA headers.
#pragma once

namespace accelerate::detail {

/// CUDA devices usable through LibTorch (0 when LibTorch has no CUDA).
int visible_cuda_devices();

/// Compute capability major of CUDA device `device` (0 without CUDA).
int cuda_compute_capability_major(int device);

/// Makes `index` the current CUDA device of this thread (no-op without CUDA).
void bind_cuda_device(int index);

}  // namespace accelerate::detail
