// AcceleratedScheduler (seeds: accelerate.scheduler.AcceleratedScheduler): a
// learning-rate scheduler stepped in time with the real optimizer steps.
//
// With step_with_optimizer (the default), step() advances the schedule only
// when the optimizers really stepped: not on micro-steps that accumulate,
// not when an fp16 step was skipped. By default the schedule advances once
// per optimizer step. Accelerate instead advances it num_processes times
// (unless split_batches), so that a schedule sized in single-process steps
// ends on time after the data is split across ranks; steps_per_call =
// num_processes reproduces that (docs/training.md, "Schedulers").
//
// Works with any LibTorch scheduler (torch::optim::LRScheduler and
// subclasses such as StepLR) and with any callable that advances a schedule.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "accelerate/runtime/lifetime.hpp"

namespace torch::optim {
class LRScheduler;
}

namespace accelerate {

class AcceleratedOptimizer;
class GradientState;

struct AcceleratedSchedulerOptions {
  bool step_with_optimizer = true;
  /// Schedule steps per real optimizer step (1; num_processes = Accelerate).
  int steps_per_call = 1;
};

class AcceleratedScheduler {
 public:
  /// `scheduler`, `gradient_state` and the optimizers must outlive this
  /// object's use: step() throws Error once `gradient_state` (the
  /// Accelerator owning it) is destroyed.
  AcceleratedScheduler(torch::optim::LRScheduler& scheduler, GradientState& gradient_state,
                       std::vector<const AcceleratedOptimizer*> optimizers, AcceleratedSchedulerOptions options = {});
  /// A schedule advanced by `advance` (one call = one schedule step).
  AcceleratedScheduler(std::function<void()> advance, GradientState& gradient_state,
                       std::vector<const AcceleratedOptimizer*> optimizers, AcceleratedSchedulerOptions options = {});

  void step();

  /// Schedule steps taken through this object (the checkpointed state).
  [[nodiscard]] std::int64_t step_count() const noexcept { return step_count_; }
  /// Brings a freshly built schedule to `steps` by replaying the missing
  /// steps (LibTorch schedulers keep their counter private, so a schedule
  /// is restored by advancing it). ConfigError when this schedule is
  /// already past `steps`: build a new scheduler before loading.
  void fast_forward_to(std::int64_t steps);

 private:
  void advance_once();

  std::function<void()> advance_;
  GradientState* gradient_state_;
  std::vector<const AcceleratedOptimizer*> optimizers_;
  AcceleratedSchedulerOptions options_;
  LifetimeWatch gradient_state_watch_;
  std::int64_t step_count_ = 0;
};

}  // namespace accelerate
