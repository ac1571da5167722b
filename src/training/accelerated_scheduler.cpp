#include "accelerate/training/accelerated_scheduler.hpp"

#include <torch/optim/schedulers/lr_scheduler.h>

#include <string>
#include <utility>

#include "accelerate/error.hpp"
#include "accelerate/training/accelerated_optimizer.hpp"
#include "accelerate/training/gradient_state.hpp"

namespace accelerate {

AcceleratedScheduler::AcceleratedScheduler(torch::optim::LRScheduler& scheduler, GradientState& gradient_state,
                                           std::vector<const AcceleratedOptimizer*> optimizers,
                                           AcceleratedSchedulerOptions options)
    : AcceleratedScheduler([&scheduler] { scheduler.step(); }, gradient_state, std::move(optimizers), options) {}

AcceleratedScheduler::AcceleratedScheduler(std::function<void()> advance, GradientState& gradient_state,
                                           std::vector<const AcceleratedOptimizer*> optimizers,
                                           AcceleratedSchedulerOptions options)
    : advance_(std::move(advance)),
      gradient_state_(&gradient_state),
      optimizers_(std::move(optimizers)),
      options_(options),
      gradient_state_watch_(gradient_state.lifetime().watch()) {
  if (!advance_) throw ConfigError("AcceleratedScheduler: the schedule to advance is empty.");
  if (options_.steps_per_call < 1) {
    throw ConfigError("AcceleratedScheduler: steps_per_call is " + std::to_string(options_.steps_per_call) +
                      "; it must be at least 1.");
  }
}

void AcceleratedScheduler::advance_once() {
  advance_();
  ++step_count_;
}

void AcceleratedScheduler::step() {
  gradient_state_watch_.check("AcceleratedScheduler::step");
  if (!options_.step_with_optimizer) {
    advance_once();
    return;
  }
  if (!gradient_state_->sync_gradients()) return;
  for (const AcceleratedOptimizer* optimizer : optimizers_) {
    if (optimizer->step_was_skipped()) return;
  }
  for (int i = 0; i < options_.steps_per_call; ++i) advance_once();
}

void AcceleratedScheduler::fast_forward_to(std::int64_t steps) {
  if (steps < step_count_) {
    throw ConfigError("AcceleratedScheduler: the checkpoint's schedule is at step " + std::to_string(steps) +
                      " but this one is already at step " + std::to_string(step_count_) +
                      "; a LibTorch schedule cannot be rewound. Build the scheduler afresh (and prepare it) "
                      "before load_state.");
  }
  while (step_count_ < steps) advance_once();
}

}  // namespace accelerate
