#include "accelerate/comm/backend.hpp"

#include <ATen/ATen.h>

namespace accelerate {

at::Tensor Backend::make_all_reduce_buffer(int64_t numel, const at::TensorOptions& options) {
  return at::zeros({numel}, options);
}

}  // namespace accelerate
