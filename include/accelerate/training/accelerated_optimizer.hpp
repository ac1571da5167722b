// AcceleratedOptimizer (seeds: accelerate.optimizer.AcceleratedOptimizer): a
// LibTorch optimizer driven by the Accelerator's gradient state.
//
// step() and zero_grad() do nothing on micro-steps that only accumulate
// gradients (sync_gradients false), so the same loop body works for any
// number of accumulation steps. With fp16 the step goes through the
// GradScaler: skipped when a gradient is inf/NaN (step_was_skipped() then
// says so) and followed by the scale update.
//
// Misuse is refused before anything is stepped (ConfigError, the same on
// every rank): a real step with gradient_accumulation_steps > 1 and no
// accumulate() since the last one; with require_accelerator_backward (the
// Accelerator's debug mode), a real step with no Accelerator::backward()
// since the last one. docs/troubleshooting.md lists the messages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "accelerate/runtime/lifetime.hpp"

namespace torch::optim {
class Optimizer;
class OptimizerParamGroup;
}  // namespace torch::optim

namespace accelerate {

class GradientState;
class GradScaler;
class ShardedOptimizer;

class AcceleratedOptimizer {
 public:
  /// `optimizer`, `gradient_state` and `scaler` (nullptr: no loss scaling)
  /// must outlive this object's use: step() and zero_grad() throw Error
  /// once `gradient_state` (the Accelerator owning it) is destroyed. `on_step` runs after every real step attempt
  /// (the Accelerator counts steps with it).
  AcceleratedOptimizer(torch::optim::Optimizer& optimizer, GradientState& gradient_state, GradScaler* scaler,
                       std::function<void(const AcceleratedOptimizer&)> on_step = {});

  /// Steps when gradients were synchronised on this micro-step; otherwise
  /// nothing. With a scaler: unscales (unless unscale_gradients ran), steps
  /// unless a gradient is inf/NaN, updates the scale. ConfigError, before
  /// stepping, when the loop bypassed the Accelerator (see the top of this file).
  void step();
  /// Clears the gradients when gradients were synchronised on this
  /// micro-step (LibTorch's zero_grad: undefined in 2.x, zeroed in 1.13).
  void zero_grad();
  /// Whether the last real step was skipped because of inf/NaN gradients.
  [[nodiscard]] bool step_was_skipped() const noexcept { return step_was_skipped_; }

  /// The user's optimizer.
  [[nodiscard]] torch::optim::Optimizer& optimizer() noexcept { return *optimizer_; }
  [[nodiscard]] const torch::optim::Optimizer& optimizer() const noexcept { return *optimizer_; }
  [[nodiscard]] std::vector<torch::optim::OptimizerParamGroup>& param_groups();

  /// For the Accelerator: the gradients of this optimizer were unscaled for
  /// the current step (clip_grad_norm_ / unscale_gradients), so step() must
  /// not unscale again.
  void mark_unscaled() noexcept { unscaled_ = true; }
  [[nodiscard]] bool unscaled() const noexcept { return unscaled_; }
  /// For the Accelerator (debug mode): a real step with no
  /// GradientState::note_backward() since the previous one is a ConfigError
  /// (its gradients came from a backward outside Accelerator::backward()).
  void require_accelerator_backward(bool value) noexcept { require_accelerator_backward_ = value; }

  /// For the Accelerator: step() and zero_grad() go through `sharded`, which
  /// wraps optimizer() (ZeRO; docs/sharding.md).
  void shard_with(std::shared_ptr<ShardedOptimizer> sharded);
  /// The ZeRO wrapper, or nullptr when the optimizer holds whole state.
  [[nodiscard]] ShardedOptimizer* sharded() noexcept { return sharded_.get(); }
  [[nodiscard]] const ShardedOptimizer* sharded() const noexcept { return sharded_.get(); }

 private:
  void check_loop();

  torch::optim::Optimizer* optimizer_;
  GradientState* gradient_state_;
  GradScaler* scaler_;
  std::function<void(const AcceleratedOptimizer&)> on_step_;
  LifetimeWatch gradient_state_watch_;
  bool step_was_skipped_ = false;
  bool unscaled_ = false;
  bool require_accelerator_backward_ = false;
  // GradientState's counters at the last real step (misuse checks).
  std::uint64_t micro_steps_at_step_ = 0;
  std::uint64_t backward_calls_at_step_ = 0;
  std::shared_ptr<ShardedOptimizer> sharded_;
};

}  // namespace accelerate
