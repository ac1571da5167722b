// mixed_precision "fp16" through the Accelerator on the CPU, where LibTorch
// autocasts to float16 there (2.5 and newer; skipped with the reason on
// older ones, where fp16 on the CPU is refused): the forward runs in float16
// and returns fp32, backward scales the loss, an overflow on one rank skips
// the step on every rank and backs the scale off everywhere, gradients are
// unscaled once (unscale_gradients, clipping by norm and by value), the
// scaler's state survives save_state/load_state, and sharded training
// (SHARD_GRAD_OP) skips an overflow that only one shard holds on every rank,
// as FULL_SHARD does, clipping by norm and by value as NO_SHARD does.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "accelerate/runtime/availability.hpp"
#include "accelerate/training/accelerator.hpp"
#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"
#include "accelerate/training/fully_sharded_model.hpp"
#include "common/gpu_skip.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
namespace fs = std::filesystem;
using acc::testing::world_rank;
using acc::testing::world_size;

class AcceleratorFp16 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!acc::is_cpu_fp16_autocast_available()) {
      GTEST_SKIP() << "LibTorch " << acc::torch_version()
                   << " has no float16 CPU autocast (2.5 and newer do); fp16 on the CPU is refused here";
    }
  }
};

struct Net : torch::nn::Module {
  Net() {
    torch::manual_seed(3);
    fc1 = register_module("fc1", torch::nn::Linear(6, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::relu(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

std::vector<torch::Tensor> snapshot(torch::nn::Module& net) {
  std::vector<torch::Tensor> copies;
  for (const auto& p : net.parameters()) copies.push_back(p.detach().clone());
  return copies;
}

bool unchanged(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

// Every rank's value of `value`, gathered on every rank.
std::vector<double> gathered(acc::Accelerator& accelerator, double value) {
  const auto all = accelerator.gather(torch::full({1}, value, torch::kDouble));
  return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + all.numel());
}

TEST_F(AcceleratorFp16, ForwardRunsInFloat16AndReturnsFp32) {
  acc::Accelerator accelerator({.mixed_precision = "fp16"});
  ASSERT_NE(accelerator.scaler(), nullptr);
  auto net = std::make_shared<Net>();
  auto model = accelerator.prepare(net);
  EXPECT_EQ(model->forward<Net>(torch::randn({4, 6})).scalar_type(), torch::kFloat);  // convert_outputs_to_fp32
  {
    auto autocast = accelerator.autocast();
    EXPECT_EQ(net->fc1->forward(torch::randn({2, 6})).scalar_type(), torch::kHalf);
  }
  EXPECT_EQ(net->fc1->weight.scalar_type(), torch::kFloat);  // fp32 master weights
}

TEST_F(AcceleratorFp16, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  acc::Accelerator accelerator({.mixed_precision = "fp16", .scaler_kwargs = {.init_scale = 1024.0}});
  auto net = std::make_shared<Net>();
  torch::optim::SGD sgd(net->parameters(), 0.05);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  const int last = world_size() - 1;
  torch::manual_seed(100 + world_rank());
  const auto x = torch::randn({8, 6});
  for (int step = 0; step < 3; ++step) {
    const bool overflow = step == 1;
    auto loss = model->forward<Net>(x).pow(2).mean();
    // Only the last rank overflows; the gradient all-reduce carries the inf to all.
    if (overflow && world_rank() == last) loss = loss * std::numeric_limits<float>::infinity();
    accelerator.backward(loss);
    const auto before = snapshot(*net);
    optimizer->step();
    optimizer->zero_grad();
    const bool skipped = accelerator.optimizer_step_was_skipped();
    EXPECT_EQ(skipped, overflow) << "step " << step;
    EXPECT_EQ(unchanged(snapshot(*net), before), overflow) << "step " << step;
    for (const double scale : gathered(accelerator, accelerator.scaler()->get_scale())) {
      EXPECT_EQ(scale, step == 0 ? 1024.0 : 512.0) << "step " << step;
    }
  }
  // Every rank holds the same parameters after the skipped step and the next one.
  for (const auto& p : net->parameters()) {
    const auto all = accelerator.gather(p.detach().reshape({1, -1}));
    for (int r = 1; r < world_size(); ++r) EXPECT_TRUE(torch::equal(all[r], all[0]));
  }
}

TEST_F(AcceleratorFp16, ClippingUnscalesTheGradientsFirst) {
  acc::Accelerator accelerator({.mixed_precision = "fp16", .scaler_kwargs = {.init_scale = 4096.0}});
  auto net = std::make_shared<Net>();
  torch::optim::SGD sgd(net->parameters(), 0.05);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  accelerator.backward(model->forward<Net>(torch::ones({4, 6})).sum());
  // The gradients hold the loss scaled by 4096; the norm clipping sees (and
  // returns) is that of the true gradient, 4096 times smaller.
  double scaled_squares = 0;
  for (const auto& p : net->parameters()) scaled_squares += p.grad().pow(2).sum().item<double>();
  const auto norm = accelerator.clip_grad_norm_(net->parameters(), 1e6);
  ASSERT_TRUE(norm.has_value());
  EXPECT_NEAR(*norm, std::sqrt(scaled_squares) / 4096.0, 1e-4 * *norm);
  optimizer->step();
  EXPECT_FALSE(accelerator.optimizer_step_was_skipped());
}

TEST_F(AcceleratorFp16, UnscaleGradientsOnceAndClipTheTrueValues) {
  acc::Accelerator accelerator({.mixed_precision = "fp16", .scaler_kwargs = {.init_scale = 1024.0}});
  auto net = std::make_shared<Net>();
  torch::optim::SGD sgd(net->parameters(), 0.05);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  accelerator.backward(model->forward<Net>(torch::ones({4, 6})).sum());
  std::vector<torch::Tensor> scaled;
  double largest = 0;
  for (const auto& p : net->parameters()) {
    scaled.push_back(p.grad().clone());
    largest = std::max(largest, p.grad().abs().max().item<double>() / 1024.0);
  }
  accelerator.unscale_gradients();
  accelerator.unscale_gradients();  // once per step: the second call changes nothing
  for (std::size_t i = 0; i < scaled.size(); ++i) {
    EXPECT_TRUE(torch::equal(net->parameters()[i].grad() * 1024.0, scaled[i])) << "parameter " << i;
  }
  // A bound above every true gradient and below the scaled ones: a clip that
  // saw the scaled values would change them.
  accelerator.clip_grad_value_(net->parameters(), 2.0 * largest);
  for (std::size_t i = 0; i < scaled.size(); ++i) {
    EXPECT_TRUE(torch::equal(net->parameters()[i].grad() * 1024.0, scaled[i])) << "parameter " << i;
  }
  const auto before = snapshot(*net);
  optimizer->step();  // not unscaled again
  for (std::size_t i = 0; i < before.size(); ++i) {
    const auto expected = before[i] - 0.05 * scaled[i] / 1024.0;
    EXPECT_TRUE(torch::allclose(net->parameters()[i].detach(), expected, 1e-6, 1e-7)) << "parameter " << i;
  }
}

TEST_F(AcceleratorFp16, TheScalersStateIsSavedAndRestored) {
  const fs::path dir = acc::testing::shared_temp_directory("accelerator_fp16_state");
  {
    acc::Accelerator accelerator({.mixed_precision = "fp16", .scaler_kwargs = {.init_scale = 256.0}});
    auto net = std::make_shared<Net>();
    torch::optim::SGD sgd(net->parameters(), 0.05);
    auto [model, optimizer] = accelerator.prepare(net, sgd);
    // One overflow (scale 128), then one good step (growth tracker 1).
    for (const float factor : {std::numeric_limits<float>::infinity(), 1.0F}) {
      accelerator.backward(model->forward<Net>(torch::ones({2, 6})).sum() * factor);
      optimizer->step();
      optimizer->zero_grad();
    }
    EXPECT_EQ(accelerator.scaler()->get_scale(), 128.0);
    accelerator.save_state(dir / "ckpt");
  }
  acc::Accelerator resumed({.mixed_precision = "fp16", .scaler_kwargs = {.init_scale = 65536.0}});
  auto net = std::make_shared<Net>();
  torch::optim::SGD sgd(net->parameters(), 0.05);
  auto [model, optimizer] = resumed.prepare(net, sgd);
  resumed.load_state(dir / "ckpt");
  EXPECT_EQ(resumed.scaler()->get_scale(), 128.0);
  EXPECT_EQ(resumed.scaler()->state().growth_tracker, 1);
  acc::testing::remove_shared_directory(dir);
}

struct ScaledRun {
  std::vector<bool> skipped;
  std::vector<double> norms;
  std::vector<torch::Tensor> parameters;
};

// Four steps of SGD with momentum under fp16 and `strategy`; at step 1 the
// last rank's loss carries an overflow in the gradient of fc2.bias alone, so
// that, sharded, only the rank owning that element finds it. Clips by norm.
ScaledRun scaled_run(const std::string& strategy) {
  acc::AcceleratorOptions options;
  options.mixed_precision = "fp16";
  options.scaler_kwargs.init_scale = 1024.0;
  options.fsdp_plugin = acc::FullyShardedDataParallelPlugin{.sharding_strategy = strategy};
  options.ddp_kwargs.bucket_cap_mb = 40.0 / (1024 * 1024);  // 10 floats: several buckets
  acc::Accelerator accelerator(options);
  auto net = std::make_shared<Net>();
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  ScaledRun run;
  torch::manual_seed(200 + world_rank());
  const auto x = torch::randn({8, 6});
  for (int step = 0; step < 4; ++step) {
    auto loss = model->forward<Net>(x).pow(2).mean();
    if (step == 1 && world_rank() == world_size() - 1) {
      loss = loss + std::numeric_limits<float>::infinity() * net->fc2->bias.sum();
    }
    accelerator.backward(loss);
    if (const auto norm = accelerator.clip_grad_norm_(net->parameters(), 1e6)) run.norms.push_back(*norm);
    optimizer->step();
    optimizer->zero_grad();
    run.skipped.push_back(accelerator.optimizer_step_was_skipped());
    for (const double scale : gathered(accelerator, accelerator.scaler()->get_scale())) {
      EXPECT_EQ(scale, step == 0 ? 1024.0 : 512.0) << strategy << ", step " << step;
    }
  }
  run.parameters = snapshot(*net);
  return run;
}

TEST_F(AcceleratorFp16, ShardedTrainingSkipsAnOverflowOfOneShardOnEveryRank) {
  const ScaledRun ddp = scaled_run("NO_SHARD");
  const ScaledRun sharded = scaled_run("SHARD_GRAD_OP");
  EXPECT_EQ(ddp.skipped, (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(sharded.skipped, ddp.skipped);
  // The norms clipping sees are the true (unscaled) ones, the overflow's excepted.
  ASSERT_EQ(sharded.norms.size(), ddp.norms.size());
  for (std::size_t k = 0; k < ddp.norms.size(); ++k) {
    if (k == 1) continue;
    EXPECT_NEAR(sharded.norms[k], ddp.norms[k], 1e-5 * ddp.norms[k]) << "step " << k;
  }
  for (std::size_t i = 0; i < ddp.parameters.size(); ++i) {
    EXPECT_TRUE(torch::allclose(sharded.parameters[i], ddp.parameters[i], 1e-5, 1e-6)) << "parameter " << i;
  }
}

// The same under FULL_SHARD, which shards the children of a Sequential: the
// overflow comes through the output's second column on the last rank at step
// 1, and at step 2 gradients are also clipped by value (the shards clamped).
ScaledRun scaled_sequential_run(const std::string& strategy) {
  acc::AcceleratorOptions options;
  options.mixed_precision = "fp16";
  options.scaler_kwargs.init_scale = 1024.0;
  options.fsdp_plugin = acc::FullyShardedDataParallelPlugin{.sharding_strategy = strategy};
  acc::Accelerator accelerator(options);
  torch::manual_seed(7);
  auto net = torch::nn::Sequential(torch::nn::Linear(6, 16), torch::nn::ReLU(), torch::nn::Linear(16, 2));
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  ScaledRun run;
  torch::manual_seed(200 + world_rank());
  const auto x = torch::randn({8, 6});
  for (int step = 0; step < 4; ++step) {
    const auto output = model(x);
    auto loss = output.pow(2).mean();
    if (step == 1 && world_rank() == world_size() - 1) {
      loss = loss + std::numeric_limits<float>::infinity() * output.narrow(1, 1, 1).sum();
    }
    accelerator.backward(loss);
    if (const auto norm = accelerator.clip_grad_norm_(net->parameters(), 1e6)) run.norms.push_back(*norm);
    if (step == 2) accelerator.clip_grad_value_(net->parameters(), 1e-3);
    optimizer->step();
    optimizer->zero_grad();
    run.skipped.push_back(accelerator.optimizer_step_was_skipped());
    for (const double scale : gathered(accelerator, accelerator.scaler()->get_scale())) {
      EXPECT_EQ(scale, step == 0 ? 1024.0 : 512.0) << strategy << ", step " << step;
    }
  }
  if (acc::FullyShardedModel* sharded = model->fully_sharded()) {
    for (const auto& item : sharded->full_state_dict()) run.parameters.push_back(item.value());
  } else {
    run.parameters = snapshot(*net);
  }
  return run;
}

TEST_F(AcceleratorFp16, FullShardSkipsAnOverflowOnEveryRankAndClipsTheTrueGradients) {
  const ScaledRun ddp = scaled_sequential_run("NO_SHARD");
  const ScaledRun sharded = scaled_sequential_run("FULL_SHARD");
  EXPECT_EQ(ddp.skipped, (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(sharded.skipped, ddp.skipped);
  ASSERT_EQ(sharded.norms.size(), ddp.norms.size());
  for (std::size_t k = 0; k < ddp.norms.size(); ++k) {
    if (k == 1) continue;
    EXPECT_NEAR(sharded.norms[k], ddp.norms[k], 1e-5 * ddp.norms[k]) << "step " << k;
  }
  EXPECT_GT(ddp.norms[2], 1e-3 * std::sqrt(146.0));  // some of the 146 gradients exceed the clip by value
  ASSERT_EQ(sharded.parameters.size(), ddp.parameters.size());
  for (std::size_t i = 0; i < ddp.parameters.size(); ++i) {
    EXPECT_TRUE(torch::allclose(sharded.parameters[i], ddp.parameters[i], 1e-5, 1e-6)) << "parameter " << i;
  }
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
