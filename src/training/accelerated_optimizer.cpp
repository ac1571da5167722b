#include "accelerate/training/accelerated_optimizer.hpp"

#include <torch/optim/optimizer.h>

#include "accelerate/amp/grad_scaler.hpp"
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
