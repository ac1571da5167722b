// The element-wise updates of the fused optimizers, over one flat run: 1-D
// contiguous tensors of one dtype on one device, the parameters, their
// gradients and their state, stepped in one pass. The formulas are
// torch::optim's (SGD, Adam, AdamW), operation for operation.
//
// Where the LibTorch has them (2.4 and later), at::_fused_sgd_,
// at::_fused_adam_ and at::_fused_adamw_ do the work, on CPU and CUDA. On
// LibTorch 1.13 the CPU runs a plain loop the compiler vectorises (built for
// the baseline and, on x86-64, for AVX2, picked at run time), split over
// threads with at::parallel_for; 16-bit parameters are computed in float and
// rounded once. Anything else (CUDA on 1.13) runs the formulas as tensor
// operations on the whole run: a handful of launches per run, not per tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace accelerate::training_detail {

struct AdamStep {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool decoupled = false;  ///< AdamW: decay the weights, not the gradient
  std::int64_t step = 1;   ///< the step being taken (1 for the first)
};

struct SgdStep {
  double lr = 0.0;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool first = false;  ///< the momentum buffer starts as the (decayed) gradient
};

/// Whether the fused kernels of LibTorch (at::_fused_*) are used.
bool uses_torch_fused_kernels();

/// One Adam or AdamW step of a run. `max_exp_avg_sq` only with amsgrad.
void adam_step(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq,
               const at::Tensor& max_exp_avg_sq, const AdamStep& args);

/// One SGD step of a run. `momentum_buffer` only with momentum.
void sgd_step(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& momentum_buffer, const SgdStep& args);

}  // namespace accelerate::training_detail
