#include "accelerate/training/accelerated_optimizer.hpp"

#include <torch/optim/optimizer.h>

#include "accelerate/amp/grad_scaler.hpp"
#include "accelerate/error.hpp"
#include "accelerate/format.hpp"
#include "accelerate/training/gradient_state.hpp"
#include "accelerate/training/sharded_optimizer.hpp"

namespace accelerate {

AcceleratedOptimizer::AcceleratedOptimizer(torch::optim::Optimizer& optimizer, GradientState& gradient_state,
                                           GradScaler* scaler, std::function<void(const AcceleratedOptimizer&)> on_step)
    : optimizer_(&optimizer),
      gradient_state_(&gradient_state),
      scaler_(scaler),
      on_step_(std::move(on_step)),
      gradient_state_watch_(gradient_state.lifetime().watch()) {}

void AcceleratedOptimizer::step() {
  gradient_state_watch_.check("AcceleratedOptimizer::step");
  if (!gradient_state_->sync_gradients()) return;
  check_loop();
  if (scaler_ != nullptr && scaler_->is_enabled()) {
    // GradScaler::step unscales unless unscale_ ran for this optimizer.
    if (sharded_) {
      // The shards' gradients are what the scaler unscales and checks; a
      // skipped step leaves shards and parameters as they were.
      sharded_->reduce_gradients();
      step_was_skipped_ = !scaler_->step(*optimizer_, [this] { sharded_->step(); });
    } else {
      step_was_skipped_ = !scaler_->step(*optimizer_);
    }
    scaler_->update();
  } else if (sharded_) {
    sharded_->step();
    step_was_skipped_ = false;
  } else {
    optimizer_->step();
    step_was_skipped_ = false;
  }
  unscaled_ = false;
  if (on_step_) on_step_(*this);
}

void AcceleratedOptimizer::check_loop() {
  // Two integer comparisons per real step. Every rank runs the same loop, so
  // every rank throws here alike, before any collective of the step.
  const std::uint64_t micro_steps = gradient_state_->micro_steps_begun();
  const std::uint64_t backward_calls = gradient_state_->backward_calls();
  const int num_steps = gradient_state_->num_steps();
  if (num_steps > 1 && micro_steps == micro_steps_at_step_) {
    throw ConfigError(accelerate::format(
        "AcceleratedOptimizer::step: gradient_accumulation_steps is {}, but no accelerator.accumulate() began a "
        "micro-step since the last optimizer step. Without it the optimizer steps on every batch, with each loss "
        "divided by {} by accelerator.backward() (a learning rate {} times too small), and the gradients are "
        "all-reduced on every batch. Open `auto accumulating = accelerator.accumulate(*model);` at the top of each "
        "micro-step (docs/training.md, Gradient accumulation), or set gradient_accumulation_steps to 1.",
        num_steps, num_steps, num_steps));
  }
  if (require_accelerator_backward_ && backward_calls == backward_calls_at_step_) {
    throw ConfigError(
        "AcceleratedOptimizer::step: no accelerator.backward() ran since the last optimizer step "
        "(ACCELERATE_DEBUG_MODE check), yet the optimizer is asked to step: its gradients came from a backward "
        "outside the Accelerator (loss.backward()), which skips the division by gradient_accumulation_steps and "
        "the fp16 loss scale, and through a model that prepare() did not return, the all-reduce too. Call "
        "accelerator.backward(loss), on a loss computed by the prepared model.");
  }
  micro_steps_at_step_ = micro_steps;
  backward_calls_at_step_ = backward_calls;
}

void AcceleratedOptimizer::zero_grad() {
  gradient_state_watch_.check("AcceleratedOptimizer::zero_grad");
  if (!gradient_state_->sync_gradients()) return;
  if (sharded_) {
    sharded_->zero_grad();
  } else {
    optimizer_->zero_grad();
  }
}

void AcceleratedOptimizer::shard_with(std::shared_ptr<ShardedOptimizer> sharded) { sharded_ = std::move(sharded); }

std::vector<torch::optim::OptimizerParamGroup>& AcceleratedOptimizer::param_groups() {
  return optimizer_->param_groups();
}

}  // namespace accelerate
