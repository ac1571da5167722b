// LocalSGD at 1, 2 and 4 ranks: parameters are the average of the ranks'
// independent local trainings every local_sgd_steps steps and at the end,
// no gradient is all-reduced in between, and accumulate() keeps the no_sync.
#include "accelerate/training/local_sgd.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "accelerate/error.hpp"
#include "accelerate/training/accelerator.hpp"
#include "common/gpu_skip.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
using acc::testing::world_rank;
using acc::testing::world_size;

class LocalSGD : public ::testing::Test {
 protected:
  void SetUp() override {
    if (acc::testing::ranks_share_a_gpu()) GTEST_SKIP() << acc::testing::kRanksShareAGpu;
  }
};

constexpr int64_t kFeatures = 5;
constexpr double kLearningRate = 0.1;

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(kFeatures, 7));
    fc2 = register_module("fc2", torch::nn::Linear(7, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::tanh(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Net);

Net make_net() {
  torch::manual_seed(11);
  return Net();
}

// Rank r's batch at step s: its own data, so the replicas drift apart.
std::pair<torch::Tensor, torch::Tensor> batch_of(int rank, int64_t step) {
  torch::manual_seed(1000 + 100 * rank + step);
  auto x = torch::randn({4, kFeatures});
  return {x, (x.sum(1, true) * (rank + 1)).sin()};
}

std::vector<torch::Tensor> snapshot(torch::nn::Module& module) {
  std::vector<torch::Tensor> copy;
  for (const auto& p : module.parameters()) copy.push_back(p.detach().cpu().clone());
  return copy;
}

// Every rank's replica trained in this process: SGD on the rank's own
// batches, the replicas averaged after every `period`-th step and after the last.
std::vector<torch::Tensor> simulate(int ranks, int64_t steps, int64_t period) {
  std::vector<Net> replicas;
  std::vector<std::unique_ptr<torch::optim::SGD>> optimizers;
  for (int r = 0; r < ranks; ++r) {
    replicas.push_back(make_net());
    optimizers.push_back(std::make_unique<torch::optim::SGD>(replicas.back()->parameters(), kLearningRate));
  }
  auto average = [&] {
    torch::NoGradGuard no_grad;
    const auto count = replicas.front()->parameters().size();
    for (size_t i = 0; i < count; ++i) {
      auto sum = torch::zeros_like(replicas.front()->parameters()[i]);
      for (auto& replica : replicas) sum += replica->parameters()[i];
      for (auto& replica : replicas) replica->parameters()[i].copy_(sum / ranks);
    }
  };
  for (int64_t s = 0; s < steps; ++s) {
    for (int r = 0; r < ranks; ++r) {
      const auto [x, y] = batch_of(r, s);
      optimizers[r]->zero_grad();
      torch::mse_loss(replicas[r]->forward(x), y).backward();
      optimizers[r]->step();
    }
    if ((s + 1) % period == 0 || s + 1 == steps) average();
  }
  return snapshot(*replicas.front());
}

void expect_close(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-5, 1e-6))
        << "parameter " << i << " differs by " << (a[i] - b[i]).abs().max().item<double>();
  }
}

// Whether rank 0's copy of the first parameter equals every other rank's.
bool replicas_agree(acc::Accelerator& accelerator, const Net& net) {
  const auto all = accelerator.gather(net->fc1->weight.detach().unsqueeze(0));
  for (int64_t r = 1; r < all.size(0); ++r) {
    if (!torch::equal(all[r], all[0])) return false;
  }
  return true;
}

TEST_F(LocalSGD, ParametersAreTheAverageOfLocalTrainingsEveryKStepsAndAtTheEnd) {
  const int64_t period = 3;
  const int64_t steps = 7;  // averages after steps 3 and 6, and the final one at the end
  acc::Accelerator accelerator;
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), kLearningRate);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  {
    acc::LocalSGD local_sgd(accelerator, *model, period);
    EXPECT_EQ(local_sgd.enabled(), world_size() > 1);
    for (int64_t s = 0; s < steps; ++s) {
      const auto [x, y] = batch_of(world_rank(), s);
      optimizer->zero_grad();
      accelerator.backward(torch::mse_loss(model(x.to(accelerator.device())), y.to(accelerator.device())));
      optimizer->step();
      local_sgd.step();
      if (world_size() > 1) {
        EXPECT_EQ(replicas_agree(accelerator, net), (s + 1) % period == 0) << "after step " << s;
      }
    }
    EXPECT_EQ(local_sgd.num_steps(), steps);
    EXPECT_EQ(local_sgd.averages(), world_size() > 1 ? steps / period : 0);
    EXPECT_FALSE(model->require_backward_grad_sync() && world_size() > 1);
  }
  EXPECT_TRUE(model->require_backward_grad_sync());  // no_sync lifted at the end
  if (world_size() > 1) EXPECT_EQ(model->counters().all_reduces, 0) << "gradients were all-reduced";
  EXPECT_TRUE(replicas_agree(accelerator, net));
  expect_close(snapshot(*net), simulate(world_size(), steps, period));
}

TEST_F(LocalSGD, AccumulateKeepsTheModelLocal) {
  acc::Accelerator accelerator({.gradient_accumulation_steps = 2});
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), kLearningRate);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  {
    acc::LocalSGD local_sgd(accelerator, *model, 2);
    for (int64_t s = 0; s < 4; ++s) {
      auto scope = accelerator.accumulate(*model);
      const auto [x, y] = batch_of(world_rank(), s);
      accelerator.backward(torch::mse_loss(model(x.to(accelerator.device())), y.to(accelerator.device())));
      optimizer->step();
      optimizer->zero_grad();
      if (accelerator.sync_gradients()) local_sgd.step();
    }
    EXPECT_EQ(local_sgd.num_steps(), 2);
  }
  // The synchronising micro-steps stayed under LocalSGD's no_sync.
  const auto counters = model->counters();
  if (world_size() > 1) EXPECT_EQ(counters.all_reduces, 0);
  EXPECT_EQ(counters.sync_steps, world_size() > 1 ? 0 : 2);
  EXPECT_EQ(counters.local_steps, world_size() > 1 ? 4 : 2);
  EXPECT_TRUE(replicas_agree(accelerator, net));
}

TEST_F(LocalSGD, DisabledItLeavesOrdinaryDataParallelTraining) {
  acc::Accelerator accelerator;
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), kLearningRate);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  {
    acc::LocalSGD local_sgd(accelerator, *model, 4, /*enabled=*/false);
    EXPECT_FALSE(local_sgd.enabled());
    for (int64_t s = 0; s < 2; ++s) {
      const auto [x, y] = batch_of(world_rank(), s);
      optimizer->zero_grad();
      accelerator.backward(torch::mse_loss(model(x.to(accelerator.device())), y.to(accelerator.device())));
      optimizer->step();
      local_sgd.step();
      EXPECT_TRUE(replicas_agree(accelerator, net)) << "after step " << s;
    }
    EXPECT_EQ(local_sgd.averages(), 0);
  }
  EXPECT_EQ(model->counters().sync_steps, 2);
}

TEST_F(LocalSGD, AStepCountBelowOneIsRefused) {
  acc::Accelerator accelerator;
  Net net = make_net();
  auto model = accelerator.prepare(net);
  const auto message =
      acc::testing::error_of<acc::ConfigError>([&] { acc::LocalSGD local_sgd(accelerator, *model, 0); });
  EXPECT_NE(message.find("local_sgd_steps is 0"), std::string::npos) << message;
  EXPECT_TRUE(model->require_backward_grad_sync());
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
