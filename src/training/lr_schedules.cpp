#include "accelerate/training/lr_schedules.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>
#include <utility>

#include "accelerate/error.hpp"
#include "detail/ascii.hpp"

namespace accelerate {

LambdaLR::LambdaLR(torch::optim::Optimizer& optimizer, Factor factor)
    : torch::optim::LRScheduler(optimizer), optimizer_(&optimizer), factor_(std::move(factor)) {
  if (!factor_) throw ConfigError("LambdaLR: the factor function is empty. Pass a function of the step.");
  // Some LibTorch versions leave the base class's counter uninitialised.
  step_count_ = 0;
  for (const auto& group : optimizer_->param_groups()) base_lrs_.push_back(group.options().get_lr());
  last_lrs_ = lrs_at(0);
  auto& groups = optimizer_->param_groups();
  for (std::size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(last_lrs_[i]);
}

std::vector<double> LambdaLR::lrs_at(std::int64_t step) const {
  const double multiplier = factor_(step);
  std::vector<double> lrs;
  lrs.reserve(base_lrs_.size());
  for (const double base : base_lrs_) lrs.push_back(base * multiplier);
  return lrs;
}

std::vector<double> LambdaLR::get_lrs() {
  const std::size_t groups = optimizer_->param_groups().size();
  if (groups != base_lrs_.size()) {
    throw ConfigError("LambdaLR::step: the optimizer has " + std::to_string(groups) + " parameter groups, but it had " +
                      std::to_string(base_lrs_.size()) +
                      " when the schedule was built. Build the schedule after adding every parameter group.");
  }
  last_lrs_ = lrs_at(static_cast<std::int64_t>(step_count_) + 1);
  return last_lrs_;
}

namespace {

// The factors of transformers.optimization, one per schedule. Every warm-up
// rises linearly from 0 and reaches 1 at step num_warmup_steps.
double warmup_ramp(std::int64_t step, std::int64_t warmup_steps) {
  return static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, warmup_steps));
}

// The fraction of the post-warm-up span already behind `step`.
double decay_progress(std::int64_t step, std::int64_t warmup_steps, std::int64_t training_steps) {
  return static_cast<double>(step - warmup_steps) /
         static_cast<double>(std::max<std::int64_t>(1, training_steps - warmup_steps));
}

double linear_schedule_factor(std::int64_t step, std::int64_t warmup_steps, std::int64_t training_steps) {
  if (step < warmup_steps) return warmup_ramp(step, warmup_steps);
  const double remaining = static_cast<double>(training_steps - step) /
                           static_cast<double>(std::max<std::int64_t>(1, training_steps - warmup_steps));
  return std::max(0.0, remaining);
}

double cosine_schedule_factor(std::int64_t step, std::int64_t warmup_steps, std::int64_t training_steps,
                              double cycles) {
  if (step < warmup_steps) return warmup_ramp(step, warmup_steps);
  const double done = decay_progress(step, warmup_steps, training_steps);
  return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * cycles * 2.0 * done)));
}

double cosine_restarts_schedule_factor(std::int64_t step, std::int64_t warmup_steps, std::int64_t training_steps,
                                       double cycles) {
  if (step < warmup_steps) return warmup_ramp(step, warmup_steps);
  const double done = decay_progress(step, warmup_steps, training_steps);
  if (done >= 1.0) return 0.0;
  // Position within the current descent; x - floor(x) is Python's x % 1.0
  // for negative x too.
  const double turns = cycles * done;
  const double within = turns - std::floor(turns);
  return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * within)));
}

double polynomial_schedule_factor(std::int64_t step, std::int64_t warmup_steps, std::int64_t training_steps,
                                  double lr_init, double lr_end, double power) {
  if (step < warmup_steps) return warmup_ramp(step, warmup_steps);
  // The decay is written on the rates themselves; LambdaLR multiplies the
  // factor by the initial rate again, hence the division by lr_init.
  if (step > training_steps) return lr_end / lr_init;
  const double remaining =
      1.0 - static_cast<double>(step - warmup_steps) / static_cast<double>(training_steps - warmup_steps);
  return ((lr_init - lr_end) * std::pow(remaining, power) + lr_end) / lr_init;
}

std::string known_schedule_names() {
  std::string list;
  for (const auto& known : scheduler_names()) list += (list.empty() ? "" : ", ") + known;
  return list;
}

std::string schedule_number_text(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

std::int64_t required_schedule_steps(const std::optional<std::int64_t>& steps, const std::string& name,
                                     const char* argument) {
  if (!steps) {
    throw ConfigError("get_scheduler: the schedule '" + name + "' needs " + argument +
                      ", which was not given. Set ScheduleOptions::" + argument + ".");
  }
  if (*steps < 0) {
    throw ConfigError("get_scheduler: " + std::string(argument) + " is " + std::to_string(*steps) +
                      " for the schedule '" + name + "'; it must be 0 or more.");
  }
  return *steps;
}

void require_finite_schedule_argument(double value, const std::string& name, const char* argument) {
  if (!std::isfinite(value)) {
    throw ConfigError("get_scheduler: " + std::string(argument) + " is " + schedule_number_text(value) +
                      " for the schedule '" + name + "'; give a finite number.");
  }
}

}  // namespace

const std::vector<std::string>& scheduler_names() {
  static const std::vector<std::string> names{"linear",     "cosine",   "cosine_with_restarts",
                                              "polynomial", "constant", "constant_with_warmup"};
  return names;
}

std::unique_ptr<LambdaLR> get_scheduler(std::string_view name, torch::optim::Optimizer& optimizer,
                                        const ScheduleOptions& options) {
  const std::string key = detail::ascii_lower(detail::trim_blanks(name));
  if (std::find(scheduler_names().begin(), scheduler_names().end(), key) == scheduler_names().end()) {
    throw ConfigError("get_scheduler: unknown schedule '" + std::string(name) + "'. Choose one of " +
                      known_schedule_names() + ".");
  }
  if (key == "constant") return std::make_unique<LambdaLR>(optimizer, [](std::int64_t) { return 1.0; });

  const std::int64_t warmup_steps = required_schedule_steps(options.num_warmup_steps, key, "num_warmup_steps");
  if (key == "constant_with_warmup") {
    return std::make_unique<LambdaLR>(optimizer, [warmup_steps](std::int64_t step) {
      return step < warmup_steps ? warmup_ramp(step, warmup_steps) : 1.0;
    });
  }

  const std::int64_t training_steps = required_schedule_steps(options.num_training_steps, key, "num_training_steps");
  if (key == "linear") {
    return std::make_unique<LambdaLR>(optimizer, [warmup_steps, training_steps](std::int64_t step) {
      return linear_schedule_factor(step, warmup_steps, training_steps);
    });
  }
  if (key == "cosine" || key == "cosine_with_restarts") {
    const bool restarts = key == "cosine_with_restarts";
    const double cycles = options.num_cycles.value_or(restarts ? 1.0 : 0.5);
    require_finite_schedule_argument(cycles, key, "num_cycles");
    if (restarts) {
      return std::make_unique<LambdaLR>(optimizer, [warmup_steps, training_steps, cycles](std::int64_t step) {
        return cosine_restarts_schedule_factor(step, warmup_steps, training_steps, cycles);
      });
    }
    return std::make_unique<LambdaLR>(optimizer, [warmup_steps, training_steps, cycles](std::int64_t step) {
      return cosine_schedule_factor(step, warmup_steps, training_steps, cycles);
    });
  }

  // "polynomial"
  require_finite_schedule_argument(options.lr_end, key, "lr_end");
  require_finite_schedule_argument(options.power, key, "power");
  if (options.lr_end < 0.0) {
    throw ConfigError("get_scheduler: lr_end is " + schedule_number_text(options.lr_end) +
                      " for the schedule 'polynomial'; a learning rate cannot be negative. Give 0 or more.");
  }
  if (options.power < 0.0) {
    throw ConfigError("get_scheduler: power is " + schedule_number_text(options.power) +
                      " for the schedule 'polynomial'; a negative power would raise the rate as it decays. Give "
                      "0 or more (1 decays linearly).");
  }
  const double lr_init = optimizer.defaults().get_lr();
  if (!(lr_init > options.lr_end)) {
    throw ConfigError("get_scheduler: the schedule 'polynomial' decays from the optimizer's learning rate (" +
                      schedule_number_text(lr_init) + ") to lr_end (" + schedule_number_text(options.lr_end) +
                      "), so lr_end must be smaller. Lower ScheduleOptions::lr_end or raise the optimizer's lr.");
  }
  if (training_steps == warmup_steps) {
    throw ConfigError("get_scheduler: the schedule 'polynomial' has num_training_steps equal to num_warmup_steps (" +
                      std::to_string(training_steps) +
                      "), which leaves no step to decay over. Make num_training_steps larger.");
  }
  return std::make_unique<LambdaLR>(optimizer, [warmup_steps, training_steps, lr_init, lr_end = options.lr_end,
                                                power = options.power](std::int64_t step) {
    return polynomial_schedule_factor(step, warmup_steps, training_steps, lr_init, lr_end, power);
  });
}

}  // namespace accelerate
