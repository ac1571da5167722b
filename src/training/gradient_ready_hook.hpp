// GradientReadyHook: a callback after AccumulateGrad has updated a
// parameter's .grad, the point where the sharded trainers take a gradient
// (ShardedOptimizer's stage 2, FullyShardedModel's stage 3).
#pragma once

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <functional>
#include <utility>

namespace accelerate::training_detail {

// LibTorch 1.13 hands out std::shared_ptr<Node>, 2.x c10::intrusive_ptr<Node>.
using AccumulatorPtr = decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));

class GradientReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  explicit GradientReadyHook(std::function<void()> ready) : ready_(std::move(ready)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    ready_();
    return outputs;
  }

 private:
  std::function<void()> ready_;
};

}  // namespace accelerate::training_detail
