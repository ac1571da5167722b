// GradScaler, autocast and mixed-precision parsing in one process.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/record_function.h>

#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "accelerate/amp/autocast.hpp"
#include "accelerate/amp/grad_scaler.hpp"
#include "accelerate/runtime/availability.hpp"
#include "accelerate/runtime/mixed_precision.hpp"
#include "accelerate/error.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::ConfigError;
using accelerate::GradScaler;
using accelerate::GradScalerKwargs;
using accelerate::testing::error_of;

constexpr float kInf = std::numeric_limits<float>::infinity();

// A small model with fixed weights and a fixed batch, so every run and the
// reference computation see the same numbers.
struct Problem {
  torch::nn::Linear model{torch::nn::LinearOptions(4, 3)};
  torch::Tensor input = torch::arange(8, torch::kFloat).reshape({2, 4}) / 8.0;
  Problem() {
    torch::NoGradGuard no_grad;
    model->weight.copy_(torch::linspace(-1, 1, 12).reshape({3, 4}));
    model->bias.copy_(torch::tensor({0.1F, -0.2F, 0.3F}));
  }
  [[nodiscard]] torch::Tensor loss() { return model(input).pow(2).sum(); }
  [[nodiscard]] std::vector<torch::Tensor> snapshot() const {
    std::vector<torch::Tensor> copies;
    for (const auto& p : model->parameters()) copies.push_back(p.detach().clone());
    return copies;
  }
};

bool same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

TEST(GradScaler, KwargsDefaultsFollowTheSeeds) {
  const GradScalerKwargs kwargs;
  EXPECT_EQ(kwargs.init_scale, 65536.0);
  EXPECT_EQ(kwargs.growth_factor, 2.0);
  EXPECT_EQ(kwargs.backoff_factor, 0.5);
  EXPECT_EQ(kwargs.growth_interval, 2000);
  EXPECT_TRUE(kwargs.enabled);
  EXPECT_EQ(GradScaler().get_scale(), 65536.0);
}

TEST(GradScaler, ScaledStepEqualsThePlainStep) {
  // With a power-of-two scale, scaling and unscaling are exact: the scaled
  // step must give bit-identical parameters to an unscaled one.
  Problem scaled;
  Problem plain;
  torch::optim::SGD scaled_opt(scaled.model->parameters(), 0.1);
  torch::optim::SGD plain_opt(plain.model->parameters(), 0.1);
  GradScaler scaler({.init_scale = 1024.0});
  const torch::Tensor loss = scaled.loss();
  const torch::Tensor scaled_loss = scaler.scale(loss);
  EXPECT_TRUE(torch::equal(scaled_loss, loss * 1024));
  scaled_loss.backward();
  EXPECT_TRUE(scaler.step(scaled_opt));
  scaler.update();
  plain.loss().backward();
  plain_opt.step();
  EXPECT_TRUE(same(scaled.snapshot(), plain.snapshot()));
}

TEST(GradScaler, SkipsExactlyTheStepWithAnInfAndBacksOff) {
  Problem problem;
  torch::optim::SGD optimizer(problem.model->parameters(), 0.05);
  GradScaler scaler({.init_scale = 1024.0, .growth_interval = 1000});
  for (int step = 0; step < 5; ++step) {
    optimizer.zero_grad();
    scaler.scale(problem.loss()).backward();
    if (step == 2) {
      torch::NoGradGuard no_grad;
      problem.model->weight.grad()[1][2].fill_(kInf);
    }
    const auto before = problem.snapshot();
    const bool stepped = scaler.step(optimizer);
    EXPECT_EQ(scaler.found_inf(), step == 2) << "step " << step;
    scaler.update();
    if (step == 2) {
      EXPECT_FALSE(stepped);
      EXPECT_TRUE(same(before, problem.snapshot())) << "parameters changed on the skipped step";
      EXPECT_EQ(scaler.get_scale(), 512.0);
    } else {
      EXPECT_TRUE(stepped) << "step " << step;
      EXPECT_FALSE(same(before, problem.snapshot())) << "parameters unchanged on clean step " << step;
      EXPECT_EQ(scaler.get_scale(), step < 2 ? 1024.0 : 512.0) << "step " << step;
    }
  }
  EXPECT_EQ(scaler.growth_tracker(), 2);
}

TEST(GradScaler, NanAlsoSkips) {
  Problem problem;
  torch::optim::SGD optimizer(problem.model->parameters(), 0.05);
  GradScaler scaler({.init_scale = 8.0, .backoff_factor = 0.25});
  scaler.scale(problem.loss()).backward();
  {
    torch::NoGradGuard no_grad;
    problem.model->bias.grad()[0].fill_(std::numeric_limits<float>::quiet_NaN());
  }
  EXPECT_FALSE(scaler.step(optimizer));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 2.0);
}

TEST(GradScaler, GrowsAfterGrowthIntervalCleanSteps) {
  Problem problem;
  torch::optim::SGD optimizer(problem.model->parameters(), 1e-3);
  GradScaler scaler({.init_scale = 8.0, .growth_factor = 4.0, .growth_interval = 3});
  const auto clean_step = [&] {
    optimizer.zero_grad();
    scaler.scale(problem.loss()).backward();
    EXPECT_TRUE(scaler.step(optimizer));
    scaler.update();
  };
  clean_step();
  clean_step();
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_EQ(scaler.growth_tracker(), 2);
  clean_step();
  EXPECT_EQ(scaler.get_scale(), 32.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  // An overflow in the middle of a run of clean steps resets the count.
  clean_step();
  optimizer.zero_grad();
  scaler.scale(problem.loss()).backward();
  {
    torch::NoGradGuard no_grad;
    problem.model->weight.grad()[0][0].fill_(kInf);
  }
  EXPECT_FALSE(scaler.step(optimizer));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 16.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  clean_step();
  clean_step();
  EXPECT_EQ(scaler.get_scale(), 16.0);
  clean_step();
  EXPECT_EQ(scaler.get_scale(), 64.0);
}

TEST(GradScaler, DoesNotGrowIntoInfinity) {
  Problem problem;
  torch::optim::SGD optimizer(problem.model->parameters(), 0.0);
  const double largest = std::ldexp(1.0, 127);
  GradScaler scaler({.init_scale = largest, .growth_interval = 1});
  // loss * 2^127 overflows, so feed the optimizer finite gradients by hand.
  for (const auto& p : problem.model->parameters()) p.mutable_grad() = torch::ones_like(p);
  EXPECT_TRUE(scaler.step(optimizer));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), largest);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, UnscaleGivesTrueGradientsOnce) {
  Problem problem;
  torch::optim::SGD optimizer(problem.model->parameters(), 0.1);
  problem.loss().backward();
  const auto true_grad = problem.model->weight.grad().clone();
  optimizer.zero_grad();

  GradScaler scaler({.init_scale = 256.0});
  scaler.scale(problem.loss()).backward();
  EXPECT_TRUE(torch::equal(problem.model->weight.grad(), true_grad * 256));
  scaler.unscale_(optimizer);
  EXPECT_TRUE(torch::equal(problem.model->weight.grad(), true_grad));
  EXPECT_NE(error_of([&] { scaler.unscale_(optimizer); }).find("already been called"), std::string::npos);
  // step() must not unscale a second time.
  const auto before = problem.model->weight.detach().clone();
  EXPECT_TRUE(scaler.step(optimizer));
  EXPECT_TRUE(torch::allclose(problem.model->weight.detach(), before - 0.1 * true_grad));
  EXPECT_NE(error_of([&] { scaler.unscale_(optimizer); }).find("after step()"), std::string::npos);
  EXPECT_NE(error_of([&] { scaler.step(optimizer); }).find("step() has already been called"), std::string::npos);
  scaler.update();
  EXPECT_NE(error_of([&] { scaler.update(); }).find("no inf checks"), std::string::npos);
}

TEST(GradScaler, UnscaleOfAParameterListCountsForTheOptimizer) {
  Problem problem;
  torch::optim::SGD optimizer(problem.model->parameters(), 0.1);
  GradScaler scaler({.init_scale = 64.0});
  scaler.scale(problem.loss()).backward();
  const auto scaled_grad = problem.model->bias.grad().clone();
  scaler.unscale_(problem.model->parameters());
  EXPECT_TRUE(torch::equal(problem.model->bias.grad(), scaled_grad / 64));
  EXPECT_NE(error_of([&] { scaler.unscale_(optimizer); }).find("already been called"), std::string::npos);
  const auto before = problem.model->bias.detach().clone();
  EXPECT_TRUE(scaler.step(optimizer));
  EXPECT_TRUE(torch::allclose(problem.model->bias.detach(), before - 0.1 * (scaled_grad / 64)));
  scaler.update();
}

// Counts the aten::mul_ calls this thread makes while it lives.
class MulCounter {
 public:
  MulCounter() {
    count_ = 0;
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
          if (std::string_view(fn.name()) == "aten::mul_") ++count_;
          return nullptr;
        }).scopes({at::RecordScope::FUNCTION}));
  }
  ~MulCounter() { at::removeCallback(handle_); }
  MulCounter(const MulCounter&) = delete;
  MulCounter& operator=(const MulCounter&) = delete;
  [[nodiscard]] static int count() { return count_; }

 private:
  static inline int count_ = 0;
  at::CallbackHandle handle_;
};

TEST(GradScaler, GradientsBackToBackInOneBufferAreUnscaledInOnePass) {
  // Ten gradients back to back in one flat buffer (as DDP's buckets and the
  // flat optimizers lay them out), one more in it after a gap, and one of its own.
  std::vector<torch::Tensor> parameters;
  const auto flat = torch::arange(1, 61, torch::kFloat);  // 60 elements
  for (int i = 0; i < 10; ++i) {
    parameters.push_back(torch::zeros({2, 2}));
    parameters.back().mutable_grad() = flat.narrow(0, 4 * i, 4).view({2, 2});
  }
  parameters.push_back(torch::zeros({3}));
  parameters.back().mutable_grad() = flat.narrow(0, 50, 3);
  parameters.push_back(torch::zeros({5}));
  parameters.back().mutable_grad() = torch::full({5}, 8.0F);
  const auto expected_flat = flat.clone();
  expected_flat.narrow(0, 0, 40).div_(8);
  expected_flat.narrow(0, 50, 3).div_(8);

  int per_division = 0;  // aten::mul_ records per in-place multiplication by a scalar
  {
    MulCounter muls;
    torch::ones({4}).mul_(0.5F);
    per_division = MulCounter::count();
  }
  ASSERT_GT(per_division, 0);
  GradScaler scaler({.init_scale = 8.0});
  {
    MulCounter muls;
    scaler.unscale_(parameters);
    // One division per run: the ten, the one after the gap, the separate one.
    EXPECT_EQ(MulCounter::count(), 3 * per_division);
  }
  EXPECT_TRUE(torch::equal(flat, expected_flat)) << flat;  // the gap untouched
  EXPECT_TRUE(torch::equal(parameters.back().grad(), torch::ones({5})));
  EXPECT_FALSE(scaler.found_inf());
  scaler.update();

  // An inf inside the run is found.
  for (auto& parameter : parameters) parameter.mutable_grad() = torch::Tensor();
  const auto second = torch::ones({40});
  for (int i = 0; i < 10; ++i) parameters[i].mutable_grad() = second.narrow(0, 4 * i, 4).view({2, 2});
  second[22] = kInf;
  scaler.unscale_(parameters);
  EXPECT_TRUE(scaler.found_inf());
}

TEST(GradScaler, RejectsFp16GradientsAndBadKwargs) {
  auto weight = torch::ones({2}, torch::kHalf).requires_grad_();
  weight.mutable_grad() = torch::ones({2}, torch::kHalf);
  GradScaler scaler;
  EXPECT_NE(error_of([&] { scaler.unscale_({weight}); }).find("FP16 gradients"), std::string::npos);
  EXPECT_NE(error_of([] { GradScaler({.growth_factor = 1.0}); }).find("growth_factor"), std::string::npos);
  EXPECT_NE(error_of([] { GradScaler({.backoff_factor = 1.5}); }).find("backoff_factor"), std::string::npos);
  EXPECT_NE(error_of([] { GradScaler({.growth_interval = 0}); }).find("growth_interval"), std::string::npos);
  EXPECT_NE(error_of([] { GradScaler({.init_scale = -1.0}); }).find("init_scale"), std::string::npos);
}

TEST(GradScaler, ScalingFollowsPyTorchTypePromotion) {
  // S is a 0-d fp32 tensor, as in PyTorch: a 0-d fp16 loss is promoted to
  // fp32 (so S × loss cannot overflow fp16), a non-scalar fp16 tensor stays fp16.
  GradScaler scaler({.init_scale = 1024.0});
  const auto scalar = scaler.scale(torch::full({}, 0.5, torch::kHalf));
  EXPECT_EQ(scalar.scalar_type(), torch::kFloat);
  EXPECT_EQ(scalar.item<float>(), 512.0F);
  const auto big = GradScaler().scale(torch::full({}, 2.0, torch::kHalf));
  EXPECT_EQ(big.item<float>(), 131072.0F);  // beyond fp16's 65504
  const auto vector = scaler.scale(torch::full({2}, 0.5, torch::kHalf));
  EXPECT_EQ(vector.scalar_type(), torch::kHalf);
  EXPECT_EQ(vector[1].item<float>(), 512.0F);
  const auto losses = scaler.scale(std::vector<torch::Tensor>{torch::ones({}), torch::full({}, 2.0)});
  EXPECT_EQ(losses[1].item<float>(), 2048.0F);
}

TEST(GradScaler, StateRoundTrip) {
  Problem problem;
  torch::optim::SGD optimizer(problem.model->parameters(), 0.01);
  GradScaler scaler({.init_scale = 128.0, .growth_factor = 3.0, .backoff_factor = 0.25, .growth_interval = 10});
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    scaler.scale(problem.loss()).backward();
    if (step == 0) {
      torch::NoGradGuard no_grad;
      problem.model->weight.grad()[0][0].fill_(kInf);
    }
    scaler.step(optimizer);
    scaler.update();
  }
  ASSERT_EQ(scaler.get_scale(), 32.0);
  ASSERT_EQ(scaler.growth_tracker(), 2);

  // Through the PyTorch-shaped dict.
  const c10::IValue dict = scaler.state_dict();
  ASSERT_TRUE(dict.isGenericDict());
  const auto entries = dict.toGenericDict();
  EXPECT_EQ(entries.at("scale").toDouble(), 32.0);
  EXPECT_EQ(entries.at("_growth_tracker").toInt(), 2);
  EXPECT_EQ(entries.at("growth_interval").toInt(), 10);
  GradScaler restored;  // other kwargs on purpose
  restored.load_state_dict(dict);
  EXPECT_EQ(restored.get_scale(), 32.0);
  EXPECT_EQ(restored.growth_tracker(), 2);
  EXPECT_EQ(restored.kwargs().growth_factor, 3.0);
  EXPECT_EQ(restored.kwargs().backoff_factor, 0.25);
  EXPECT_EQ(restored.kwargs().growth_interval, 10);

  // Through tensors, as a tensor-only checkpoint holds it.
  const auto tensors = scaler.state().to_tensors();
  EXPECT_EQ(tensors.at("scale").scalar_type(), torch::kFloat);
  GradScaler from_tensors;
  from_tensors.load_state(accelerate::GradScalerState::from_tensors(tensors));
  EXPECT_EQ(from_tensors.get_scale(), 32.0);
  EXPECT_EQ(from_tensors.growth_tracker(), 2);
  EXPECT_EQ(from_tensors.kwargs().growth_interval, 10);

  // The restored scaler continues exactly like the original.
  for (int step = 0; step < 8; ++step) {
    for (GradScaler* s : {&scaler, &restored}) {
      optimizer.zero_grad();
      s->scale(problem.loss()).backward();
      s->step(optimizer);
      s->update();
    }
  }
  EXPECT_EQ(scaler.get_scale(), 96.0);
  EXPECT_EQ(restored.get_scale(), scaler.get_scale());
  EXPECT_EQ(restored.growth_tracker(), scaler.growth_tracker());

  // Bad input.
  c10::impl::GenericDict missing(c10::StringType::get(), c10::AnyType::get());
  missing.insert("scale", 2.0);
  EXPECT_NE(error_of([&] { restored.load_state_dict(missing); }).find("'growth_factor'"), std::string::npos);
  c10::impl::GenericDict empty(c10::StringType::get(), c10::AnyType::get());
  EXPECT_NE(error_of([&] { restored.load_state_dict(empty); }).find("disabled GradScaler"), std::string::npos);
}

TEST(GradScaler, DisabledIsAPassThrough) {
  Problem problem;
  torch::optim::SGD optimizer(problem.model->parameters(), 0.1);
  GradScaler scaler({.enabled = false});
  const torch::Tensor loss = problem.loss();
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  loss.backward();
  const auto grad = problem.model->weight.grad().clone();
  scaler.unscale_(optimizer);
  scaler.unscale_(optimizer);  // no bookkeeping when disabled
  EXPECT_TRUE(torch::equal(problem.model->weight.grad(), grad));
  {
    torch::NoGradGuard no_grad;
    problem.model->bias.grad()[0].fill_(kInf);
  }
  const auto before = problem.snapshot();
  EXPECT_TRUE(scaler.step(optimizer));  // steps even over inf, as PyTorch
  EXPECT_FALSE(same(before, problem.snapshot()));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_TRUE(scaler.state_dict().toGenericDict().empty());
  EXPECT_THROW((void)scaler.state(), ConfigError);
}

// --- autocast -----------------------------------------------------------------

TEST(Autocast, CpuBf16MatmulAndRestore) {
  const auto a = torch::randn({4, 4});
  const auto b = torch::randn({4, 4});
  ASSERT_FALSE(accelerate::is_autocast_enabled(c10::DeviceType::CPU));
  {
    accelerate::AutocastGuard guard(c10::DeviceType::CPU, c10::kBFloat16);
    EXPECT_TRUE(accelerate::is_autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(accelerate::autocast_dtype(c10::DeviceType::CPU), c10::kBFloat16);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    EXPECT_EQ(torch::nn::functional::linear(a, b).scalar_type(), torch::kBFloat16);
    // Ops outside autocast's lists keep fp32.
    EXPECT_EQ((a + b).scalar_type(), torch::kFloat);
  }
  EXPECT_FALSE(accelerate::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
}

TEST(Autocast, Nesting) {
  const auto a = torch::randn({3, 3});
  const bool cache_before = accelerate::is_autocast_cache_enabled();
  {
    accelerate::AutocastGuard outer(c10::DeviceType::CPU, c10::kBFloat16);
    {
      accelerate::AutocastGuard inner(c10::DeviceType::CPU, c10::kBFloat16,
                                      {.enabled = false, .cache_enabled = !cache_before});
      EXPECT_FALSE(accelerate::is_autocast_enabled(c10::DeviceType::CPU));
      EXPECT_EQ(accelerate::is_autocast_cache_enabled(), !cache_before);
      EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat);
      {
        accelerate::AutocastGuard innermost(c10::DeviceType::CPU, c10::kBFloat16);
        EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kBFloat16);
      }
      EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat);
    }
    EXPECT_TRUE(accelerate::is_autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(accelerate::is_autocast_cache_enabled(), cache_before);
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kBFloat16);
  }
  EXPECT_FALSE(accelerate::is_autocast_enabled(c10::DeviceType::CPU));
}

TEST(Autocast, CudaStateIsSetAndRestoredWithoutTouchingCpu) {
  // The CUDA autocast state is thread-local bookkeeping; it can be entered
  // without a GPU, and must not change CPU operations.
  const bool was_enabled = accelerate::is_autocast_enabled(c10::DeviceType::CUDA);
  const auto was_dtype = accelerate::autocast_dtype(c10::DeviceType::CUDA);
  const auto a = torch::randn({2, 2});
  {
    accelerate::AutocastGuard guard(c10::DeviceType::CUDA, c10::kBFloat16);
    EXPECT_TRUE(accelerate::is_autocast_enabled(c10::DeviceType::CUDA));
    EXPECT_EQ(accelerate::autocast_dtype(c10::DeviceType::CUDA), c10::kBFloat16);
    EXPECT_FALSE(accelerate::is_autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat);
  }
  EXPECT_EQ(accelerate::is_autocast_enabled(c10::DeviceType::CUDA), was_enabled);
  EXPECT_EQ(accelerate::autocast_dtype(c10::DeviceType::CUDA), was_dtype);
}

// float16 on the CPU: computed in float16 where LibTorch can (2.5 and newer),
// refused with the version and the alternative otherwise.
TEST(Autocast, CpuFloat16FollowsTheLibTorchVersion) {
  EXPECT_EQ(accelerate::is_cpu_fp16_autocast_available(), accelerate::is_torch_version(">=", "2.5"));
  if (!accelerate::is_cpu_fp16_autocast_available()) {
    const auto message = error_of([] { accelerate::AutocastGuard g(c10::DeviceType::CPU, c10::kHalf); });
    EXPECT_NE(message.find("bfloat16 on cpu"), std::string::npos) << message;
    EXPECT_NE(message.find(accelerate::torch_version()), std::string::npos) << message;
    return;
  }
  const auto a = torch::randn({4, 4});
  {
    accelerate::AutocastGuard guard(c10::DeviceType::CPU, c10::kHalf);
    EXPECT_EQ(accelerate::autocast_dtype(c10::DeviceType::CPU), c10::kHalf);
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kHalf);
  }
  EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat);
}

TEST(Autocast, RejectsUnsupportedPairs) {
  EXPECT_THROW(accelerate::AutocastGuard g(c10::DeviceType::CUDA, c10::kFloat), ConfigError);
  EXPECT_THROW(accelerate::AutocastGuard g(c10::DeviceType::XLA, c10::kBFloat16), ConfigError);
  EXPECT_FALSE(accelerate::is_autocast_enabled(c10::DeviceType::CPU));
  const accelerate::AutocastKwargs kwargs;
  EXPECT_TRUE(kwargs.enabled);
  EXPECT_FALSE(kwargs.cache_enabled.has_value());
}

TEST(MixedPrecision, Parse) {
  using accelerate::MixedPrecision;
  EXPECT_EQ(accelerate::parse_mixed_precision("no"), MixedPrecision::No);
  EXPECT_EQ(accelerate::parse_mixed_precision("FP16"), MixedPrecision::FP16);
  EXPECT_EQ(accelerate::parse_mixed_precision(" bf16 "), MixedPrecision::BF16);
  const auto message = error_of([] { (void)accelerate::parse_mixed_precision("fp8"); });
  EXPECT_NE(message.find("'fp8'"), std::string::npos) << message;
  EXPECT_NE(message.find("\"bf16\""), std::string::npos) << message;
  EXPECT_THROW((void)accelerate::parse_mixed_precision(""), ConfigError);
  EXPECT_EQ(accelerate::to_string(MixedPrecision::BF16), "bf16");
  EXPECT_EQ(accelerate::autocast_dtype_of(MixedPrecision::FP16), c10::kHalf);
  EXPECT_EQ(accelerate::autocast_dtype_of(MixedPrecision::BF16), c10::kBFloat16);
  EXPECT_FALSE(accelerate::autocast_dtype_of(MixedPrecision::No).has_value());
}

TEST(MixedPrecision, DeviceSupport) {
  using accelerate::MixedPrecision;
  EXPECT_NO_THROW(accelerate::check_mixed_precision_supported(MixedPrecision::BF16, "cpu"));
  EXPECT_NO_THROW(accelerate::check_mixed_precision_supported(MixedPrecision::No, "cpu"));
  EXPECT_NO_THROW(accelerate::check_mixed_precision_supported(MixedPrecision::FP16, "cuda:1"));
  if (accelerate::is_cpu_fp16_autocast_available()) {
    EXPECT_NO_THROW(accelerate::check_mixed_precision_supported(MixedPrecision::FP16, "cpu"));
  } else {
    const auto message = error_of([] { accelerate::check_mixed_precision_supported(MixedPrecision::FP16, "cpu"); });
    EXPECT_NE(message.find("Use \"bf16\""), std::string::npos) << message;
    EXPECT_NE(message.find("LibTorch 2.5"), std::string::npos) << message;
  }
  EXPECT_THROW(accelerate::check_mixed_precision_supported(MixedPrecision::BF16, "mps"), ConfigError);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
