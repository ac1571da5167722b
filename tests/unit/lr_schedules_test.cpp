// get_scheduler and LambdaLR: each schedule's learning rate against
// transformers' formulas (restated below, plus values checked by hand), the
// argument errors, stepping through an AcceleratedScheduler and the replay
// that restores a schedule from a checkpoint's step count.
#include "accelerate/training/lr_schedules.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "accelerate/error.hpp"
#include "accelerate/training/accelerated_scheduler.hpp"
#include "accelerate/training/gradient_state.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::AcceleratedScheduler;
using accelerate::ConfigError;
using accelerate::get_scheduler;
using accelerate::GradientState;
using accelerate::LambdaLR;
using accelerate::ScheduleOptions;
using accelerate::testing::error_of;

constexpr double kLr = 0.1;
constexpr double kTolerance = 1e-12;

// One parameter group at kLr, or a second one at `second_lr` (the
// optimizer's default rate stays kLr).
struct Training {
  torch::Tensor weight = torch::zeros({2}, torch::requires_grad());
  torch::Tensor bias = torch::zeros({1}, torch::requires_grad());
  torch::optim::SGD optimizer;

  Training() : optimizer(std::vector<torch::Tensor>{weight}, torch::optim::SGDOptions(kLr)) {}
  explicit Training(double second_lr) : Training() {
    optimizer.add_param_group(
        torch::optim::OptimizerParamGroup({bias}, std::make_unique<torch::optim::SGDOptions>(second_lr)));
  }
  [[nodiscard]] double lr(std::size_t group = 0) const { return optimizer.param_groups()[group].options().get_lr(); }
};

// The rate of group 0 after 0, 1, ..., `last` steps of a fresh schedule.
std::vector<double> lrs_through(const std::string& name, const ScheduleOptions& options, std::int64_t last) {
  Training training;
  auto schedule = get_scheduler(name, training.optimizer, options);
  std::vector<double> lrs{training.lr()};
  for (std::int64_t step = 1; step <= last; ++step) {
    schedule->step();
    lrs.push_back(training.lr());
  }
  return lrs;
}

// transformers' multipliers, written out once more from its
// optimization.py; the library's own are not used here.
double reference_warmup(double step, double warmup) { return step / std::max(1.0, warmup); }

double reference_linear(double step, double warmup, double total) {
  if (step < warmup) return reference_warmup(step, warmup);
  return std::max(0.0, (total - step) / std::max(1.0, total - warmup));
}

double reference_cosine(double step, double warmup, double total, double cycles) {
  if (step < warmup) return reference_warmup(step, warmup);
  const double p = (step - warmup) / std::max(1.0, total - warmup);
  return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * cycles * 2.0 * p)));
}

double reference_restarts(double step, double warmup, double total, double cycles) {
  if (step < warmup) return reference_warmup(step, warmup);
  const double p = (step - warmup) / std::max(1.0, total - warmup);
  if (p >= 1.0) return 0.0;
  const double phase = std::fmod(cycles * p, 1.0);  // cycles and p are not negative here
  return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * phase)));
}

double reference_polynomial(double step, double warmup, double total, double lr_init, double lr_end, double power) {
  if (step < warmup) return reference_warmup(step, warmup);
  if (step > total) return lr_end / lr_init;
  const double left = 1.0 - (step - warmup) / (total - warmup);
  return ((lr_init - lr_end) * std::pow(left, power) + lr_end) / lr_init;
}

void expect_matches(const std::vector<double>& lrs, const std::function<double(double)>& reference) {
  for (std::size_t step = 0; step < lrs.size(); ++step) {
    EXPECT_NEAR(lrs[step], kLr * reference(static_cast<double>(step)), kTolerance) << "at step " << step;
  }
}

TEST(LrSchedules, LinearByHand) {
  // Warm-up of 10 steps, 100 in all: up to 0.1 at step 10, down to 0 at step 100, 0 beyond.
  const auto lrs = lrs_through("linear", {.num_warmup_steps = 10, .num_training_steps = 100}, 120);
  EXPECT_DOUBLE_EQ(lrs[0], 0.0);
  EXPECT_NEAR(lrs[5], 0.05, kTolerance);
  EXPECT_NEAR(lrs[10], 0.1, kTolerance);
  EXPECT_NEAR(lrs[55], 0.05, kTolerance);
  EXPECT_NEAR(lrs[91], 0.01, kTolerance);
  EXPECT_DOUBLE_EQ(lrs[100], 0.0);
  EXPECT_DOUBLE_EQ(lrs[120], 0.0);
  expect_matches(lrs, [](double step) { return reference_linear(step, 10, 100); });
}

TEST(LrSchedules, LinearWithoutWarmup) {
  const auto lrs = lrs_through("linear", {.num_warmup_steps = 0, .num_training_steps = 4}, 6);
  const std::vector<double> by_hand{0.1, 0.075, 0.05, 0.025, 0.0, 0.0, 0.0};
  for (std::size_t step = 0; step < by_hand.size(); ++step) EXPECT_NEAR(lrs[step], by_hand[step], kTolerance);
}

TEST(LrSchedules, CosineByHand) {
  // Warm-up 10, then half a cosine over 100 steps.
  const auto lrs = lrs_through("cosine", {.num_warmup_steps = 10, .num_training_steps = 110}, 160);
  EXPECT_DOUBLE_EQ(lrs[0], 0.0);
  EXPECT_NEAR(lrs[5], 0.05, kTolerance);
  EXPECT_NEAR(lrs[10], 0.1, kTolerance);
  EXPECT_NEAR(lrs[35], 0.1 * (0.5 + std::sqrt(2.0) / 4.0), kTolerance);  // a quarter: (1 + cos 45°) / 2
  EXPECT_NEAR(lrs[60], 0.05, kTolerance);                                // half-way
  EXPECT_NEAR(lrs[110], 0.0, kTolerance);
  // Past the end the cosine rises again, as in transformers.
  EXPECT_NEAR(lrs[160], 0.05, kTolerance);
  expect_matches(lrs, [](double step) { return reference_cosine(step, 10, 110, 0.5); });
}

TEST(LrSchedules, CosineWithCycles) {
  // One whole wave: down to 0 half-way, back to the top at the end.
  const auto lrs = lrs_through("cosine", {.num_warmup_steps = 0, .num_training_steps = 100, .num_cycles = 1.0}, 100);
  EXPECT_NEAR(lrs[50], 0.0, kTolerance);
  EXPECT_NEAR(lrs[100], 0.1, kTolerance);
  expect_matches(lrs, [](double step) { return reference_cosine(step, 0, 100, 1.0); });
}

TEST(LrSchedules, CosineWithRestartsByHand) {
  // Two descents of 50 steps each.
  const auto lrs =
      lrs_through("cosine_with_restarts", {.num_warmup_steps = 0, .num_training_steps = 100, .num_cycles = 2.0}, 110);
  EXPECT_NEAR(lrs[0], 0.1, kTolerance);
  EXPECT_NEAR(lrs[25], 0.05, kTolerance);
  EXPECT_LT(lrs[49], 1e-3);
  EXPECT_NEAR(lrs[50], 0.1, kTolerance);  // the restart
  EXPECT_NEAR(lrs[75], 0.05, kTolerance);
  EXPECT_DOUBLE_EQ(lrs[100], 0.0);
  EXPECT_DOUBLE_EQ(lrs[110], 0.0);
  expect_matches(lrs, [](double step) { return reference_restarts(step, 0, 100, 2.0); });
}

TEST(LrSchedules, CosineWithRestartsDefaultsToOneDescent) {
  const auto lrs = lrs_through("cosine_with_restarts", {.num_warmup_steps = 4, .num_training_steps = 24}, 30);
  EXPECT_NEAR(lrs[2], 0.05, kTolerance);
  EXPECT_NEAR(lrs[14], 0.05, kTolerance);
  expect_matches(lrs, [](double step) { return reference_restarts(step, 4, 24, 1.0); });
}

TEST(LrSchedules, PolynomialByHand) {
  // From 0.1 down to 0.01 with power 2 over 100 steps after a warm-up of 10.
  const ScheduleOptions options{.num_warmup_steps = 10, .num_training_steps = 110, .lr_end = 0.01, .power = 2.0};
  const auto lrs = lrs_through("polynomial", options, 130);
  EXPECT_DOUBLE_EQ(lrs[0], 0.0);
  EXPECT_NEAR(lrs[5], 0.05, kTolerance);
  EXPECT_NEAR(lrs[10], 0.1, kTolerance);
  EXPECT_NEAR(lrs[60], 0.09 * 0.25 + 0.01, kTolerance);  // half the span left, squared
  EXPECT_NEAR(lrs[110], 0.01, kTolerance);
  EXPECT_NEAR(lrs[130], 0.01, kTolerance);
  expect_matches(lrs, [](double step) { return reference_polynomial(step, 10, 110, kLr, 0.01, 2.0); });
}

TEST(LrSchedules, PolynomialDefaultsDecayLinearlyToATenthOfAMillionth) {
  const auto lrs = lrs_through("polynomial", {.num_warmup_steps = 0, .num_training_steps = 10}, 12);
  EXPECT_NEAR(lrs[5], (0.1 - 1e-7) * 0.5 + 1e-7, kTolerance);
  EXPECT_NEAR(lrs[10], 1e-7, kTolerance);
  EXPECT_NEAR(lrs[12], 1e-7, kTolerance);
  expect_matches(lrs, [](double step) { return reference_polynomial(step, 0, 10, kLr, 1e-7, 1.0); });
}

TEST(LrSchedules, PolynomialWorksOnTheOptimizersDefaultRate) {
  // transformers divides by optimizer.defaults["lr"]; a group with another
  // rate gets that group's rate times the same multiplier.
  Training training(0.02);
  auto schedule = get_scheduler("polynomial", training.optimizer,
                                {.num_warmup_steps = 0, .num_training_steps = 10, .lr_end = 0.01});
  for (int step = 0; step < 10; ++step) schedule->step();
  EXPECT_NEAR(training.lr(0), 0.01, kTolerance);
  EXPECT_NEAR(training.lr(1), 0.02 * 0.01 / 0.1, kTolerance);
  EXPECT_EQ(schedule->base_lrs(), (std::vector<double>{0.1, 0.02}));
}

TEST(LrSchedules, ConstantAndConstantWithWarmup) {
  const auto constant = lrs_through("constant", {}, 5);
  for (const double lr : constant) EXPECT_DOUBLE_EQ(lr, 0.1);
  const auto warm = lrs_through("constant_with_warmup", {.num_warmup_steps = 4}, 7);
  const std::vector<double> by_hand{0.0, 0.025, 0.05, 0.075, 0.1, 0.1, 0.1, 0.1};
  for (std::size_t step = 0; step < by_hand.size(); ++step) EXPECT_NEAR(warm[step], by_hand[step], kTolerance);
}

TEST(LrSchedules, EveryGroupScaledFromItsOwnInitialRate) {
  Training training(0.02);
  auto schedule = get_scheduler("linear", training.optimizer, {.num_warmup_steps = 4, .num_training_steps = 8});
  EXPECT_DOUBLE_EQ(training.lr(0), 0.0);
  EXPECT_DOUBLE_EQ(training.lr(1), 0.0);
  for (int step = 0; step < 2; ++step) schedule->step();
  EXPECT_NEAR(training.lr(0), 0.05, kTolerance);
  EXPECT_NEAR(training.lr(1), 0.01, kTolerance);
  EXPECT_EQ(schedule->last_step(), 2);
  ASSERT_EQ(schedule->last_lrs().size(), 2U);
  EXPECT_NEAR(schedule->last_lrs()[1], 0.01, kTolerance);
}

TEST(LrSchedules, NamesIgnoreCaseAndBlanks) {
  Training training;
  auto schedule = get_scheduler(" Linear\t", training.optimizer, {.num_warmup_steps = 2, .num_training_steps = 4});
  schedule->step();
  EXPECT_NEAR(training.lr(), 0.05, kTolerance);
}

TEST(LrSchedules, ArgumentErrors) {
  Training training;
  auto& optimizer = training.optimizer;

  const std::string unknown = error_of([&] { (void)get_scheduler("triangular", optimizer, {}); });
  EXPECT_NE(unknown.find("unknown schedule 'triangular'"), std::string::npos) << unknown;
  for (const auto& name : accelerate::scheduler_names()) EXPECT_NE(unknown.find(name), std::string::npos) << name;
  EXPECT_EQ(accelerate::scheduler_names().size(), 6U);

  for (const char* name : {"linear", "cosine", "cosine_with_restarts", "polynomial"}) {
    const std::string no_total = error_of([&] { (void)get_scheduler(name, optimizer, {.num_warmup_steps = 1}); });
    EXPECT_NE(no_total.find("needs num_training_steps"), std::string::npos) << name << ": " << no_total;
    const std::string no_warmup = error_of([&] { (void)get_scheduler(name, optimizer, {.num_training_steps = 10}); });
    EXPECT_NE(no_warmup.find("needs num_warmup_steps"), std::string::npos) << name << ": " << no_warmup;
  }
  const std::string warmup_only = error_of([&] { (void)get_scheduler("constant_with_warmup", optimizer, {}); });
  EXPECT_NE(warmup_only.find("needs num_warmup_steps"), std::string::npos) << warmup_only;
  // What the schedule does not need may be missing.
  EXPECT_NO_THROW((void)get_scheduler("constant", optimizer, {}));
  EXPECT_NO_THROW((void)get_scheduler("constant_with_warmup", optimizer, {.num_warmup_steps = 3}));

  const std::string negative =
      error_of([&] { (void)get_scheduler("linear", optimizer, {.num_warmup_steps = -1, .num_training_steps = 9}); });
  EXPECT_NE(negative.find("num_warmup_steps is -1"), std::string::npos) << negative;

  // lr_end must lie below the optimizer's rate (0.1); equal is refused too.
  for (const double lr_end : {0.1, 0.2}) {
    const std::string high = error_of([&] {
      (void)get_scheduler("polynomial", optimizer, {.num_warmup_steps = 0, .num_training_steps = 9, .lr_end = lr_end});
    });
    EXPECT_NE(high.find("lr_end must be smaller"), std::string::npos) << high;
  }
  const std::string no_decay =
      error_of([&] { (void)get_scheduler("polynomial", optimizer, {.num_warmup_steps = 5, .num_training_steps = 5}); });
  EXPECT_NE(no_decay.find("no step to decay over"), std::string::npos) << no_decay;
  const std::string power = error_of([&] {
    (void)get_scheduler("polynomial", optimizer, {.num_warmup_steps = 0, .num_training_steps = 9, .power = -1.0});
  });
  EXPECT_NE(power.find("power is -1"), std::string::npos) << power;
  const std::string negative_end = error_of([&] {
    (void)get_scheduler("polynomial", optimizer, {.num_warmup_steps = 0, .num_training_steps = 9, .lr_end = -0.5});
  });
  EXPECT_NE(negative_end.find("lr_end is -0.5"), std::string::npos) << negative_end;
  const std::string cycles = error_of([&] {
    (void)get_scheduler("cosine", optimizer,
                        {.num_warmup_steps = 0,
                         .num_training_steps = 9,
                         .num_cycles = std::numeric_limits<double>::quiet_NaN()});
  });
  EXPECT_NE(cycles.find("num_cycles is nan"), std::string::npos) << cycles;

  EXPECT_NE(error_of([&] { LambdaLR empty(optimizer, nullptr); }).find("factor function is empty"), std::string::npos);
}

TEST(LrSchedules, LambdaLRWithAFactorOfOurOwn) {
  Training training;
  LambdaLR halving(training.optimizer, [](std::int64_t step) { return std::pow(0.5, static_cast<double>(step)); });
  EXPECT_DOUBLE_EQ(training.lr(), 0.1);
  halving.step();
  halving.step();
  EXPECT_DOUBLE_EQ(training.lr(), 0.025);
  EXPECT_DOUBLE_EQ(halving.factor(3), 0.125);
}

TEST(LrSchedules, ParameterGroupAddedLaterIsAnError) {
  Training training;
  LambdaLR schedule(training.optimizer, [](std::int64_t) { return 1.0; });
  training.optimizer.add_param_group(
      torch::optim::OptimizerParamGroup({training.bias}, std::make_unique<torch::optim::SGDOptions>(0.5)));
  const std::string message = error_of([&] { schedule.step(); });
  EXPECT_NE(message.find("has 2 parameter groups, but it had 1"), std::string::npos) << message;
}

TEST(LrSchedules, AcceleratedSchedulerStepsOnlyOnRealSteps) {
  Training training;
  auto schedule = get_scheduler("linear", training.optimizer, {.num_warmup_steps = 4, .num_training_steps = 8});
  GradientState gradient_state;
  AcceleratedScheduler prepared(*schedule, gradient_state, {});
  gradient_state.set_sync_gradients(false);  // an accumulating micro-step
  prepared.step();
  EXPECT_EQ(schedule->last_step(), 0);
  EXPECT_DOUBLE_EQ(training.lr(), 0.0);
  gradient_state.set_sync_gradients(true);
  prepared.step();
  EXPECT_EQ(schedule->last_step(), 1);
  EXPECT_NEAR(training.lr(), 0.025, kTolerance);
}

// save_state stores AcceleratedScheduler::step_count(); load_state replays
// that many steps on a freshly built schedule (fast_forward_to).
TEST(LrSchedules, FastForwardRestoresEverySchedule) {
  const ScheduleOptions options{.num_warmup_steps = 7, .num_training_steps = 50, .lr_end = 0.001, .power = 1.5};
  for (const auto& name : accelerate::scheduler_names()) {
    SCOPED_TRACE(name);
    Training before(0.03);
    auto schedule = get_scheduler(name, before.optimizer, options);
    GradientState gradient_state;
    AcceleratedScheduler prepared(*schedule, gradient_state, {});
    for (int micro_step = 0; micro_step < 60; ++micro_step) {
      gradient_state.set_sync_gradients(micro_step % 3 != 2);  // one micro-step in three only accumulates
      prepared.step();
    }
    const std::int64_t saved = prepared.step_count();
    ASSERT_EQ(saved, 40);

    Training after(0.03);
    auto fresh = get_scheduler(name, after.optimizer, options);
    GradientState fresh_state;
    AcceleratedScheduler restored(*fresh, fresh_state, {});
    restored.fast_forward_to(saved);
    EXPECT_EQ(restored.step_count(), saved);
    EXPECT_EQ(fresh->last_step(), schedule->last_step());
    for (std::size_t group = 0; group < 2; ++group) EXPECT_DOUBLE_EQ(after.lr(group), before.lr(group));

    // Both go on alike (the original's last micro-step only accumulated).
    gradient_state.set_sync_gradients(true);
    for (int step = 0; step < 15; ++step) {
      prepared.step();
      restored.step();
      EXPECT_DOUBLE_EQ(after.lr(0), before.lr(0)) << "step " << step;
      EXPECT_DOUBLE_EQ(after.lr(1), before.lr(1)) << "step " << step;
    }
  }
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
