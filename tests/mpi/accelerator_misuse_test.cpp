// Training-loop misuse named on the step it happens, at 1 and 2 ranks: each
// check of docs/troubleshooting.md ("Training-loop misuse"), and correct loops
// that come close to each check without tripping it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "accelerate/error.hpp"
#include "accelerate/runtime/environment.hpp"
#include "accelerate/training/accelerator.hpp"
#include "common/gpu_skip.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
using acc::testing::error_of;
using acc::testing::world_rank;
using acc::testing::world_size;

// With a GPU visible these tests train on it, which needs a GPU per rank.
class AcceleratorMisuse : public ::testing::Test {
 protected:
  void SetUp() override {
    if (acc::testing::ranks_share_a_gpu()) GTEST_SKIP() << acc::testing::kRanksShareAGpu;
  }
};

constexpr int64_t kFeatures = 4;
constexpr int64_t kBatch = 3;

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(kFeatures, 5));
    fc2 = register_module("fc2", torch::nn::Linear(5, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::tanh(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Net);

Net make_net() {
  torch::manual_seed(7);
  return Net();
}

// Rank `rank`'s batch of step `step` (any rank can make any rank's).
torch::Tensor inputs(int64_t step, int rank) {
  torch::manual_seed(100 + 10 * step + rank);
  return torch::randn({kBatch, kFeatures});
}
torch::Tensor targets(const torch::Tensor& x) { return x.sum(1, true).sin(); }

std::vector<torch::Tensor> snapshot(torch::nn::Module& module) {
  std::vector<torch::Tensor> copy;
  for (const auto& p : module.parameters()) copy.push_back(p.detach().cpu().clone());
  return copy;
}

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "expected '" << part << "' in: " << message;
}

TEST_F(AcceleratorMisuse, AStepWithoutAccumulateIsRefusedWhenAccumulating) {
  acc::Accelerator accelerator({.gradient_accumulation_steps = 2});
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  const auto before = snapshot(*net);
  const auto x = inputs(0, world_rank()).to(accelerator.device());
  accelerator.backward(torch::mse_loss(model(x), targets(x)));
  const std::string message = error_of([&] { optimizer->step(); });
  expect_contains(message, "gradient_accumulation_steps is 2");
  expect_contains(message, "accelerator.accumulate()");
  const auto after = snapshot(*net);
  for (std::size_t k = 0; k < before.size(); ++k) EXPECT_TRUE(torch::equal(before[k], after[k]));  // nothing stepped
  EXPECT_EQ(accelerator.step(), 0);

  // The loop the user meant: accumulate() around each micro-step.
  optimizer->zero_grad();
  for (int64_t i = 0; i < 4; ++i) {
    auto accumulating = accelerator.accumulate(*model);
    const auto xi = inputs(i, world_rank()).to(accelerator.device());
    accelerator.backward(torch::mse_loss(model(xi), targets(xi)));
    optimizer->step();
    optimizer->zero_grad();
  }
  EXPECT_EQ(accelerator.step(), 2);
}

TEST_F(AcceleratorMisuse, LossBackwardOnAPreparedModelIsRefused) {
  // Plain, and on a micro-step that only accumulates (the hooks' local branch).
  for (const int k : {1, 2}) {
    acc::Accelerator accelerator({.gradient_accumulation_steps = k});
    Net net = make_net();
    auto model = accelerator.prepare(net);
    auto accumulating = accelerator.accumulate(*model);
    const auto x = inputs(0, world_rank()).to(accelerator.device());
    const auto loss = torch::mse_loss(model(x), targets(x));
    const std::string message = error_of([&] { loss.backward(); });
    expect_contains(message, "outside accelerator.backward()");
    expect_contains(message, "Call accelerator.backward(loss) instead");
  }
}

TEST_F(AcceleratorMisuse, LossBackwardUnderShardGradOpIsRefused) {
  acc::AcceleratorOptions options;
  options.fsdp_plugin = acc::FullyShardedDataParallelPlugin{.sharding_strategy = "SHARD_GRAD_OP"};
  acc::Accelerator accelerator(options);
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  const auto x = inputs(0, world_rank()).to(accelerator.device());
  const auto loss = torch::mse_loss(model(x), targets(x));
  const std::string message = error_of([&] { loss.backward(); });
  expect_contains(message, "SHARD_GRAD_OP");
  expect_contains(message, "outside accelerator.backward()");
}

TEST_F(AcceleratorMisuse, ABypassedPreparedForwardIsRefused) {
  {
    acc::Accelerator accelerator({.cpu = true, .mixed_precision = "bf16"});
    Net net = make_net();
    auto model = accelerator.prepare(net);
    const auto x = inputs(0, world_rank());
    const std::string message = error_of([&] { accelerator.backward(torch::mse_loss(net->forward(x), targets(x))); });
    expect_contains(message, "no forward went through the prepared model");
    expect_contains(message, "autocast to BFloat16");
    expect_contains(message, "Call model(x) on what prepare() returned");
  }
  {
    // Without mixed precision too: the reducer was not armed.
    acc::Accelerator accelerator;
    Net net = make_net();
    auto model = accelerator.prepare(net);
    const auto x = inputs(0, world_rank()).to(accelerator.device());
    accelerator.backward(torch::mse_loss(model(x), targets(x)));  // a prepared forward: fine
    const std::string message = error_of([&] { accelerator.backward(torch::mse_loss(net->forward(x), targets(x))); });
    expect_contains(message, "no forward went through the prepared model");
    expect_contains(message, "arming the gradient reducer");
  }
}

TEST_F(AcceleratorMisuse, CorrectLoopsCloseToTheChecksPass) {
  acc::Accelerator accelerator;
  Net generator = make_net();
  auto critic_net = std::make_shared<torch::nn::LinearImpl>(1, 1);
  torch::optim::SGD generator_sgd(generator->parameters(), 0.01);
  torch::optim::SGD critic_sgd(critic_net->parameters(), 0.01);
  auto [g, g_opt, c, c_opt] = accelerator.prepare(generator, generator_sgd, critic_net, critic_sgd);
  for (int64_t step = 0; step < 2; ++step) {
    const auto x = inputs(step, world_rank()).to(accelerator.device());
    // One generator forward serves two backward passes: the critic's (on a
    // detached copy, which reaches only the critic) and the generator's.
    const auto fake = g(x);
    c_opt->zero_grad();
    accelerator.backward(c(fake.detach()).mean());
    c_opt->step();
    g_opt->zero_grad();
    accelerator.backward(-c(fake).mean());
    g_opt->step();
    // Evaluation through the module itself, without gradients.
    {
      torch::NoGradGuard no_grad;
      (void)generator->forward(x);
    }
    // The module's own forward after prepare_forward().
    g_opt->zero_grad();
    g->prepare_forward();
    accelerator.backward(torch::mse_loss(generator->forward(x), targets(x)));
    g_opt->step();
  }
  EXPECT_EQ(accelerator.step(), 4);  // the first prepared optimizer's steps
}

TEST_F(AcceleratorMisuse, GradientsFromBeforePrepareAreCleared) {
  Net net = make_net();
  {
    // A backward on the module before prepare(), different on every rank.
    const auto x = inputs(99, world_rank());
    torch::mse_loss(net->forward(x), targets(x) * (world_rank() + 2)).backward();
  }
  ASSERT_TRUE(net->fc1->weight.grad().defined());
  acc::Accelerator accelerator;
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  for (const auto& p : net->parameters()) EXPECT_FALSE(p.grad().defined());
  // The accumulation-style loop clears after each step, not before the first.
  const auto x = inputs(0, world_rank()).to(accelerator.device());
  accelerator.backward(torch::mse_loss(model(x), targets(x)));
  optimizer->step();
  optimizer->zero_grad();

  // One process, one step on every rank's batch.
  Net reference = make_net();
  torch::optim::SGD reference_sgd(reference->parameters(), 0.1);
  std::vector<torch::Tensor> batches;
  for (int r = 0; r < world_size(); ++r) batches.push_back(inputs(0, r));
  const auto global = torch::cat(batches);
  torch::mse_loss(reference->forward(global), targets(global)).backward();
  reference_sgd.step();
  const auto trained = snapshot(*net);
  const auto expected = snapshot(*reference);
  for (std::size_t k = 0; k < trained.size(); ++k) {
    EXPECT_TRUE(torch::allclose(trained[k], expected[k], 1e-5, 1e-6))
        << "parameter " << k << " differs by " << (trained[k] - expected[k]).abs().max().item<double>();
  }
}

TEST_F(AcceleratorMisuse, DebugModeRefusesAStepWithoutAcceleratorBackward) {
  for (const bool debug : {false, true}) {
    auto patch = acc::patch_environment({{"ACCELERATE_DEBUG_MODE", debug ? "1" : "0"}});
    acc::Accelerator accelerator;
    // Only the optimizer is prepared: the module's gradients are never averaged.
    Net net = make_net();
    net->to(accelerator.device());
    torch::optim::SGD sgd(net->parameters(), 0.1);
    auto optimizer = accelerator.prepare(sgd);
    const auto x = inputs(0, world_rank()).to(accelerator.device());
    torch::mse_loss(net->forward(x), targets(x)).backward();
    const std::string message = error_of([&] { optimizer->step(); });
    if (debug) {
      expect_contains(message, "no accelerator.backward() ran since the last optimizer step");
      expect_contains(message, "ACCELERATE_DEBUG_MODE");
    } else {
      EXPECT_EQ(message, "<no exception>");  // a debug-mode check only
    }
    // A correct loop passes in debug mode too.
    optimizer->zero_grad();
    accelerator.backward(torch::mse_loss(net->forward(x), targets(x)));
    EXPECT_NO_THROW(optimizer->step());
  }
}

// This suite's MPI runs at MPI_THREAD_FUNNELED (the test main's default):
// an asynchronous save, whose writer thread calls MPI, is refused at once.
TEST_F(AcceleratorMisuse, AsynchronousSavesAreRefusedBelowMpiThreadMultiple) {
  const auto configured = error_of<acc::ConfigError>(
      [] { acc::Accelerator accelerator({.project_config = {.async_save = true}}); });
  expect_contains(configured, "MPI_THREAD_MULTIPLE");
  expect_contains(configured, "ACCELERATE_MPI_THREAD_LEVEL=multiple");
  acc::Accelerator accelerator;
  auto model = accelerator.prepare(make_net().ptr());
  const auto per_call = error_of<acc::ConfigError>(
      [&] { (void)accelerator.save_state(std::string("never_written"), {.async_save = true}); });
  expect_contains(per_call, "MPI_THREAD_MULTIPLE");
  EXPECT_FALSE(std::filesystem::exists("never_written"));
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
