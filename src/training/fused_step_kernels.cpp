#include "training/fused_step_kernels.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/version.h>

#include <cmath>
#include <type_traits>
#include <vector>

// LibTorch 2.4 added CPU kernels to the fused optimizer operations (CUDA had
// them from 2.0); from then on one call steps a whole run on either device.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define ACCELERATE_TORCH_FUSED_OPTIMIZERS 1
#else
#define ACCELERATE_TORCH_FUSED_OPTIMIZERS 0
#endif

namespace accelerate::training_detail {

namespace {

// Elements per task of at::parallel_for: a run smaller than this stays on the
// calling thread.
constexpr std::int64_t kGrain = 32768;

// The type the arithmetic is done in: float for 16-bit parameters.
template <typename T>
using Opmath = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
T* data_of(const at::Tensor& tensor) {
  return tensor.defined() ? static_cast<T*>(tensor.data_ptr()) : nullptr;
}

// One pass of Adam/AdamW over [begin, end). Each line is one operation of
// torch::optim's step on the same values in the same order, so a float or
// double run rounds as LibTorch's unfused step does (up to the contraction
// of a multiply and an add, which LibTorch's vectorised kernels may do).
template <typename T, bool kDecoupled, bool kDecay, bool kAmsgrad>
[[gnu::always_inline]] inline void adam_body(T* __restrict param, const T* __restrict grad, T* __restrict exp_avg,
                                             T* __restrict exp_avg_sq, T* __restrict max_exp_avg_sq, std::int64_t begin,
                                             std::int64_t end, const AdamStep& a) {
  using M = Opmath<T>;
  const double bias_correction1 = 1 - std::pow(a.beta1, static_cast<double>(a.step));
  const double bias_correction2 = 1 - std::pow(a.beta2, static_cast<double>(a.step));
  const M beta1 = static_cast<M>(a.beta1);
  const M one_minus_beta1 = static_cast<M>(1 - a.beta1);
  const M beta2 = static_cast<M>(a.beta2);
  const M one_minus_beta2 = static_cast<M>(1 - a.beta2);
  const M eps = static_cast<M>(a.eps);
  const M weight_decay = static_cast<M>(a.weight_decay);
  const M weight_factor = static_cast<M>(1 - a.lr * a.weight_decay);
  const M bias_correction2_sqrt = static_cast<M>(std::sqrt(bias_correction2));
  const M neg_step_size = static_cast<M>(-(a.lr / bias_correction1));
  for (std::int64_t i = begin; i < end; ++i) {
    M p = static_cast<M>(param[i]);
    M g = static_cast<M>(grad[i]);
    if constexpr (kDecay && kDecoupled) p = p * weight_factor;
    if constexpr (kDecay && !kDecoupled) g = g + weight_decay * p;
    const M m = static_cast<M>(exp_avg[i]) * beta1 + one_minus_beta1 * g;
    const M v = static_cast<M>(exp_avg_sq[i]) * beta2 + one_minus_beta2 * g * g;
    M second = v;
    if constexpr (kAmsgrad) {
      const M previous = static_cast<M>(max_exp_avg_sq[i]);
      second = (v > previous || v != v) ? v : previous;  // NaN propagates, as in at::max
      max_exp_avg_sq[i] = static_cast<T>(second);
    }
    const M denom = std::sqrt(second) / bias_correction2_sqrt + eps;
    exp_avg[i] = static_cast<T>(m);
    exp_avg_sq[i] = static_cast<T>(v);
    param[i] = static_cast<T>(p + neg_step_size * (m / denom));
  }
}

template <typename T, bool kDecay, bool kMomentum, bool kNesterov>
[[gnu::always_inline]] inline void sgd_body(T* __restrict param, const T* __restrict grad, T* __restrict buffer,
                                            std::int64_t begin, std::int64_t end, const SgdStep& a) {
  using M = Opmath<T>;
  const M weight_decay = static_cast<M>(a.weight_decay);
  const M momentum = static_cast<M>(a.momentum);
  const M one_minus_dampening = static_cast<M>(1 - a.dampening);
  const M neg_lr = static_cast<M>(-1 * a.lr);
  const bool first = a.first;
  for (std::int64_t i = begin; i < end; ++i) {
    const M p = static_cast<M>(param[i]);
    M d = static_cast<M>(grad[i]);
    if constexpr (kDecay) d = d + weight_decay * p;
    if constexpr (kMomentum) {
      const M b = first ? d : static_cast<M>(buffer[i]) * momentum + one_minus_dampening * d;
      buffer[i] = static_cast<T>(b);
      if constexpr (kNesterov) {
        d = d + momentum * b;
      } else {
        d = b;
      }
    }
    param[i] = static_cast<T>(p + neg_lr * d);
  }
}

// The loops compiled twice on x86-64: for the baseline (16-byte vectors) and
// for AVX2 (32-byte vectors), picked at run time as LibTorch picks its
// kernels. AVX2 without FMA: no multiply-add is contracted, so both round alike.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ACCELERATE_FUSED_AVX2 1
bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

template <typename T, bool kDecoupled, bool kDecay, bool kAmsgrad>
__attribute__((target("avx2"))) void adam_range_avx2(T* param, const T* grad, T* exp_avg, T* exp_avg_sq,
                                                     T* max_exp_avg_sq, std::int64_t begin, std::int64_t end,
                                                     const AdamStep& a) {
  adam_body<T, kDecoupled, kDecay, kAmsgrad>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, begin, end, a);
}

template <typename T, bool kDecay, bool kMomentum, bool kNesterov>
__attribute__((target("avx2"))) void sgd_range_avx2(T* param, const T* grad, T* buffer, std::int64_t begin,
                                                    std::int64_t end, const SgdStep& a) {
  sgd_body<T, kDecay, kMomentum, kNesterov>(param, grad, buffer, begin, end, a);
}
#else
#define ACCELERATE_FUSED_AVX2 0
#endif

template <typename T, bool kDecoupled, bool kDecay, bool kAmsgrad>
void adam_range(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq, std::int64_t begin,
                std::int64_t end, const AdamStep& a) {
#if ACCELERATE_FUSED_AVX2
  if (has_avx2()) {
    adam_range_avx2<T, kDecoupled, kDecay, kAmsgrad>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, begin, end, a);
    return;
  }
#endif
  adam_body<T, kDecoupled, kDecay, kAmsgrad>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, begin, end, a);
}

template <typename T, bool kDecay, bool kMomentum, bool kNesterov>
void sgd_range(T* param, const T* grad, T* buffer, std::int64_t begin, std::int64_t end, const SgdStep& a) {
#if ACCELERATE_FUSED_AVX2
  if (has_avx2()) {
    sgd_range_avx2<T, kDecay, kMomentum, kNesterov>(param, grad, buffer, begin, end, a);
    return;
  }
#endif
  sgd_body<T, kDecay, kMomentum, kNesterov>(param, grad, buffer, begin, end, a);
}

template <typename T>
void adam_loop(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq,
               const at::Tensor& max_exp_avg_sq, const AdamStep& args) {
  T* const p = data_of<T>(param);
  const T* const g = data_of<T>(grad);
  T* const m = data_of<T>(exp_avg);
  T* const v = data_of<T>(exp_avg_sq);
  T* const mx = data_of<T>(max_exp_avg_sq);
  const bool decay = args.weight_decay != 0;
  auto run = [&](auto decoupled, auto decayed, auto amsgrad) {
    at::parallel_for(0, param.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
      adam_range<T, decltype(decoupled)::value, decltype(decayed)::value, decltype(amsgrad)::value>(p, g, m, v, mx,
                                                                                                    begin, end, args);
    });
  };
  using Yes = std::true_type;
  using No = std::false_type;
  if (args.decoupled) {
    if (decay) {
      args.amsgrad ? run(Yes{}, Yes{}, Yes{}) : run(Yes{}, Yes{}, No{});
    } else {
      args.amsgrad ? run(Yes{}, No{}, Yes{}) : run(Yes{}, No{}, No{});
    }
  } else if (decay) {
    args.amsgrad ? run(No{}, Yes{}, Yes{}) : run(No{}, Yes{}, No{});
  } else {
    args.amsgrad ? run(No{}, No{}, Yes{}) : run(No{}, No{}, No{});
  }
}

template <typename T>
void sgd_loop(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& buffer, const SgdStep& args) {
  T* const p = data_of<T>(param);
  const T* const g = data_of<T>(grad);
  T* const b = data_of<T>(buffer);
  auto run = [&](auto decayed, auto momentum, auto nesterov) {
    at::parallel_for(0, param.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
      sgd_range<T, decltype(decayed)::value, decltype(momentum)::value, decltype(nesterov)::value>(p, g, b, begin, end,
                                                                                                   args);
    });
  };
  using Yes = std::true_type;
  using No = std::false_type;
  const bool decay = args.weight_decay != 0;
  if (args.momentum == 0) {
    decay ? run(Yes{}, No{}, No{}) : run(No{}, No{}, No{});
  } else if (args.nesterov) {
    decay ? run(Yes{}, Yes{}, Yes{}) : run(No{}, Yes{}, Yes{});
  } else {
    decay ? run(Yes{}, Yes{}, No{}) : run(No{}, Yes{}, No{});
  }
}

// Whether the loops above can step this run.
[[maybe_unused]] bool loop_runs(const at::Tensor& param) {
  if (!param.is_cpu()) return false;
  switch (param.scalar_type()) {
    case at::kFloat:
    case at::kDouble:
    case at::kBFloat16:
    case at::kHalf: return true;
    default: return false;
  }
}

// The same formulas as tensor operations on the whole run (devices and dtypes
// without a loop or a fused kernel).
void adam_ops(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq,
              const at::Tensor& max_exp_avg_sq, const AdamStep& a) {
  const double bias_correction1 = 1 - std::pow(a.beta1, static_cast<double>(a.step));
  const double bias_correction2 = 1 - std::pow(a.beta2, static_cast<double>(a.step));
  at::Tensor g = grad;
  if (a.weight_decay != 0) {
    if (a.decoupled) {
      param.mul_(1 - a.lr * a.weight_decay);
    } else {
      g = grad.add(param, a.weight_decay);
    }
  }
  exp_avg.mul_(a.beta1).add_(g, 1 - a.beta1);
  exp_avg_sq.mul_(a.beta2).addcmul_(g, g, 1 - a.beta2);
  at::Tensor second = exp_avg_sq;
  if (a.amsgrad) {
    at::max_out(const_cast<at::Tensor&>(max_exp_avg_sq), exp_avg_sq, max_exp_avg_sq);
    second = max_exp_avg_sq;
  }
  const at::Tensor denom = (second.sqrt() / std::sqrt(bias_correction2)).add_(a.eps);
  param.addcdiv_(exp_avg, denom, -(a.lr / bias_correction1));
}

void sgd_ops(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& buffer, const SgdStep& a) {
  at::Tensor d = grad;
  if (a.weight_decay != 0) d = d.add(param, a.weight_decay);
  if (a.momentum != 0) {
    if (a.first) {
      buffer.copy_(d);
    } else {
      buffer.mul_(a.momentum).add_(d, 1 - a.dampening);
    }
    d = a.nesterov ? d.add(buffer, a.momentum) : buffer;
  }
  param.add_(d, -1 * a.lr);
}

}  // namespace

bool uses_torch_fused_kernels() { return ACCELERATE_TORCH_FUSED_OPTIMIZERS != 0; }

void adam_step(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg, const at::Tensor& exp_avg_sq,
               const at::Tensor& max_exp_avg_sq, const AdamStep& args) {
#if ACCELERATE_TORCH_FUSED_OPTIMIZERS
  if (param.is_cpu() || param.is_cuda()) {
    // The step count as the kernels take it: a float tensor on the device,
    // already counting this step.
    const at::Tensor step = at::full({}, static_cast<double>(args.step), param.options().dtype(at::kFloat));
    std::vector<at::Tensor> maxima;
    if (args.amsgrad) maxima.push_back(max_exp_avg_sq);
    if (args.decoupled) {
      at::_fused_adamw_({param}, {grad}, {exp_avg}, {exp_avg_sq}, maxima, {step}, args.lr, args.beta1, args.beta2,
                        args.weight_decay, args.eps, args.amsgrad, /*maximize=*/false);
    } else {
      at::_fused_adam_({param}, {grad}, {exp_avg}, {exp_avg_sq}, maxima, {step}, args.lr, args.beta1, args.beta2,
                       args.weight_decay, args.eps, args.amsgrad, /*maximize=*/false);
    }
    return;
  }
#else
  if (loop_runs(param)) {
    switch (param.scalar_type()) {
      case at::kFloat: return adam_loop<float>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
      case at::kDouble: return adam_loop<double>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
      case at::kBFloat16: return adam_loop<c10::BFloat16>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
      case at::kHalf: return adam_loop<c10::Half>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
      default: break;
    }
  }
#endif
  adam_ops(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
}

void sgd_step(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& momentum_buffer, const SgdStep& args) {
#if ACCELERATE_TORCH_FUSED_OPTIMIZERS
  if (param.is_cpu() || param.is_cuda()) {
    std::vector<at::Tensor> buffers;
    if (args.momentum != 0) buffers.push_back(momentum_buffer);
    at::_fused_sgd_({param}, {grad}, buffers, args.weight_decay, args.momentum, args.lr, args.dampening, args.nesterov,
                    /*maximize=*/false, /*is_first_step=*/args.first);
    return;
  }
#else
  if (loop_runs(param)) {
    switch (param.scalar_type()) {
      case at::kFloat: return sgd_loop<float>(param, grad, momentum_buffer, args);
      case at::kDouble: return sgd_loop<double>(param, grad, momentum_buffer, args);
      case at::kBFloat16: return sgd_loop<c10::BFloat16>(param, grad, momentum_buffer, args);
      case at::kHalf: return sgd_loop<c10::Half>(param, grad, momentum_buffer, args);
      default: break;
    }
  }
#endif
  sgd_ops(param, grad, momentum_buffer, args);
}

}  // namespace accelerate::training_detail
