// Learning-rate schedules with warm-up (seeds: transformers.optimization,
// get_scheduler and the get_*_schedule* functions it dispatches to).
//
// LibTorch ships StepLR only; every transformer recipe warms the learning
// rate up and then decays it. LambdaLR is LibTorch's missing counterpart of
// PyTorch's LambdaLR: it remembers each parameter group's learning rate when
// it is built and sets group i's rate to base_lrs[i] * factor(step) after each
// step (and to base_lrs[i] * factor(0) at once, as PyTorch does).
// get_scheduler builds one by name with transformers' formulas:
//
//   "linear"               warm-up, then straight down to 0 at num_training_steps
//   "cosine"               warm-up, then a cosine of num_cycles waves (0.5: half a wave down to 0)
//   "cosine_with_restarts" warm-up, then num_cycles (1) cosine descents, each restarting at the top
//   "polynomial"           warm-up, then (lr_init - lr_end) * remaining^power + lr_end, lr_end after the end
//   "constant"             the optimizer's rate throughout
//   "constant_with_warmup" warm-up, then the optimizer's rate
//
// Warm-up multiplies by step / num_warmup_steps while step < num_warmup_steps.
//
//   auto schedule = accelerate::get_scheduler("linear", optimizer,
//                                             {.num_warmup_steps = 100, .num_training_steps = 10000});
//   auto prepared = accelerator.prepare(*schedule);   // steps with real optimizer steps
//
// A LambdaLR is a pure function of its step count, so Accelerator::load_state
// restores it by replaying steps on a freshly built one (AcceleratedScheduler::
// fast_forward_to). Build it on an optimizer that still carries its initial
// learning rates: a second schedule built after the first has changed them
// would take the changed rates as its base.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/optim/schedulers/lr_scheduler.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelerate {

class LambdaLR : public torch::optim::LRScheduler {
 public:
  /// The multiplier of the initial learning rate at a step (0, 1, 2, ...).
  using Factor = std::function<double(std::int64_t step)>;

  /// Records each parameter group's current learning rate as its base and
  /// applies factor(0). `optimizer` must outlive this object and keep its
  /// number of parameter groups. ConfigError when `factor` is empty.
  LambdaLR(torch::optim::Optimizer& optimizer, Factor factor);

  /// Steps taken so far (PyTorch's last_epoch).
  [[nodiscard]] std::int64_t last_step() const noexcept { return static_cast<std::int64_t>(step_count_); }
  /// The learning rate of each group when the schedule was built.
  [[nodiscard]] const std::vector<double>& base_lrs() const noexcept { return base_lrs_; }
  /// The learning rates this schedule set last (PyTorch's get_last_lr()).
  [[nodiscard]] const std::vector<double>& last_lrs() const noexcept { return last_lrs_; }
  /// The multiplier at `step`.
  [[nodiscard]] double factor(std::int64_t step) const { return factor_(step); }

 protected:
  /// The rates of the step being taken (LRScheduler::step calls it once per
  /// step, before it counts the step).
  std::vector<double> get_lrs() override;

 private:
  [[nodiscard]] std::vector<double> lrs_at(std::int64_t step) const;

  torch::optim::Optimizer* optimizer_;
  Factor factor_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lrs_;
};

/// The arguments of get_scheduler; each schedule reads the ones it needs.
struct ScheduleOptions {
  /// Steps of the linear warm-up from 0; every schedule but "constant" needs it.
  std::optional<std::int64_t> num_warmup_steps;
  /// Optimizer steps of the whole run; "linear", "cosine",
  /// "cosine_with_restarts" and "polynomial" need it.
  std::optional<std::int64_t> num_training_steps;
  /// Waves of "cosine" (default 0.5), descents of "cosine_with_restarts" (default 1).
  std::optional<double> num_cycles;
  /// "polynomial": the rate reached at num_training_steps; must be below the
  /// optimizer's default learning rate.
  double lr_end = 1e-7;
  /// "polynomial": the exponent of the decay (1: linear).
  double power = 1.0;
};

/// The names get_scheduler knows, in transformers' order.
[[nodiscard]] const std::vector<std::string>& scheduler_names();

/// The schedule `name` (ASCII case and surrounding blanks ignored) over
/// `optimizer`, with transformers' formulas. ConfigError for an unknown name
/// (the message lists the known ones), for a step count the schedule needs
/// but `options` lacks, for negative step counts, for non-finite num_cycles,
/// lr_end or power, and for "polynomial" with a negative lr_end or power,
/// with lr_end not below the optimizer's default learning rate or with
/// num_training_steps equal to num_warmup_steps (no step left to decay over).
[[nodiscard]] std::unique_ptr<LambdaLR> get_scheduler(std::string_view name, torch::optim::Optimizer& optimizer,
                                                      const ScheduleOptions& options = {});

}  // namespace accelerate
