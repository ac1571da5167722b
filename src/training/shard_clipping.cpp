#include "training/shard_clipping.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>

namespace accelerate::training_detail {

double clip_norm_of_shards(const std::vector<at::Tensor>& shard_grads, ProcessGroup& group, double max_norm,
                           double norm_type) {
  torch::NoGradGuard no_grad;
  const bool infinity = std::isinf(norm_type);
  double local = 0;
  for (const at::Tensor& grad : shard_grads) {
    if (!grad.defined() || grad.numel() == 0) continue;
    const at::Tensor values = grad.to(at::kDouble);
    local = infinity ? std::max(local, values.abs().max().item<double>())
                     : local + values.abs().pow(norm_type).sum().item<double>();
  }
  at::Tensor total = at::full({1}, local, at::kDouble);
  AllReduceOptions reduce;
  reduce.op = infinity ? ReduceOp::Max : ReduceOp::Sum;
  group.all_reduce(total, reduce);
  const double norm = infinity ? total.item<double>() : std::pow(total.item<double>(), 1.0 / norm_type);
  const double coefficient = max_norm / (norm + 1e-6);  // torch's clip_grad_norm_ rule
  if (coefficient < 1.0) {
    for (const at::Tensor& grad : shard_grads) {
      if (grad.defined()) grad.mul_(coefficient);  // in place: the shard's own .grad
    }
  }
  return norm;
}

}  // namespace accelerate::training_detail
