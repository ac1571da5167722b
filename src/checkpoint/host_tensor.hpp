// A tensor's bytes on the host, as the checkpoint writers (HDF5 and
// safetensors) hand them to the file.
#pragma once

#include <ATen/core/Tensor.h>

namespace accelerate::checkpoint::detail {

/// The tensor's bytes as a contiguous CPU tensor: the tensor itself when it
/// already is one (the common case: no copy), otherwise a copy of this
/// tensor only.
inline at::Tensor host_contiguous(const at::Tensor& tensor) {
  at::Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(at::kCPU);
  return host.is_contiguous() ? host : host.contiguous();
}

}  // namespace accelerate::checkpoint::detail
