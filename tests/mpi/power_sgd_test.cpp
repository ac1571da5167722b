// PowerSGD and batched PowerSGD (DDPCommunicationHookType::POWER_SGD,
// BATCHED_POWER_SGD) at 1, 2 and 4 ranks: a full-rank approximation is the
// exact average, a low-rank one puts less on the wire and is the same on
// every rank, error feedback recovers what one step leaves out, and the
// options are checked on every rank.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "accelerate/comm/operations.hpp"
#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/training/distributed_model.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
using Hook = acc::DDPCommunicationHookType;

// 9·9 + 9 + 9 + 1 = 100 parameters: one bucket, a 10 × 10 square when batched.
struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(9, 9));
    fc2 = register_module("fc2", torch::nn::Linear(9, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::tanh(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// One weight whose gradient is the constant `direction` (loss = <weight, direction>).
struct ConstantGradientImpl : torch::nn::Module {
  explicit ConstantGradientImpl(int64_t n) { weight = register_parameter("weight", torch::zeros({n, n})); }
  torch::Tensor forward(const torch::Tensor& direction) { return (weight * direction).sum(); }
  torch::Tensor weight;
};

struct WideImpl : torch::nn::Module {
  WideImpl() { fc = register_module("fc", torch::nn::Linear(64, 64)); }
  torch::Tensor forward(const torch::Tensor& x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};

class PowerSgd : public ::testing::Test {
 protected:
  acc::State state;
  std::unique_ptr<acc::ProcessGroup> group = acc::ProcessGroup::world(state);
  const int rank = group->rank();
  const int size = group->size();

  // Every rank's gradients after one backward on its own rows of a fixed batch.
  template <class Net>
  std::vector<torch::Tensor> gradients(acc::DistributedModel& model, const torch::Tensor& x, const torch::Tensor& y) {
    const int64_t b = x.size(0) / size;
    auto& net = static_cast<Net&>(*model.module());
    net.zero_grad();
    torch::mse_loss(model.forward<Net>(x.narrow(0, rank * b, b)), y.narrow(0, rank * b, b)).backward();
    std::vector<torch::Tensor> out;
    for (const auto& p : net.parameters()) out.push_back(p.grad().clone());
    return out;
  }
  // The same on one process over the whole batch: the exact average.
  template <class Net>
  static std::vector<torch::Tensor> reference(Net& net, const torch::Tensor& x, const torch::Tensor& y) {
    net.zero_grad();
    torch::mse_loss(net.forward(x), y).backward();
    std::vector<torch::Tensor> out;
    for (const auto& p : net.parameters()) out.push_back(p.grad().clone());
    return out;
  }
};

double relative_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double num = 0;
  double den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]).pow(2).sum().item<double>();
    den += b[i].pow(2).sum().item<double>();
  }
  return std::sqrt(num / den);
}

TEST_F(PowerSgd, AFullRankApproximationIsTheExactAverage) {
  torch::manual_seed(5);
  const auto x = torch::randn({8 * size, 9});
  const auto y = torch::randn({8 * size, 1});
  for (Hook hook : {Hook::POWER_SGD, Hook::BATCHED_POWER_SGD}) {
    torch::manual_seed(3);
    auto net = std::make_shared<NetImpl>();
    torch::manual_seed(3);
    NetImpl single;
    acc::DistributedModel model(net, *group,
                                {.comm_hook = hook,
                                 .comm_state_option = {{"matrix_approximation_rank", "10"},
                                                       {"min_compression_rate", "0"},
                                                       {"start_powerSGD_iter", "0"}}});
    for (int step = 0; step < 3; ++step) {  // warm-started Q from the second step on
      const auto got = gradients<NetImpl>(model, x, y);
      const auto want = reference(single, x, y);
      // Exact up to float32 rounding in Gram-Schmidt (about 1e-4 here); a wrong step is off by O(1).
      EXPECT_LT(relative_difference(got, want), 2e-3) << acc::to_string(hook) << " step " << step;
    }
    int64_t gradient_bytes = 0;
    for (const auto& bucket : model.counters().buckets) gradient_bytes += bucket.bytes;
    // P and Q of full rank cost more than the gradients: the counter shows the compressed path ran.
    if (size > 1) EXPECT_GT(model.counters().bytes_all_reduced, 3 * gradient_bytes) << acc::to_string(hook);
  }
}

TEST_F(PowerSgd, RankOneSendsLessAndEveryRankGetsTheSameGradient) {
  torch::manual_seed(5);
  const auto x = torch::randn({4 * size, 64});
  const auto y = torch::randn({4 * size, 64});
  torch::manual_seed(4);
  auto net = std::make_shared<WideImpl>();
  torch::manual_seed(4);
  WideImpl single;
  acc::DistributedModel model(net, *group,
                              {.comm_hook = Hook::POWER_SGD, .comm_state_option = {{"start_powerSGD_iter", "2"}}});
  const int64_t gradient_bytes = (64 * 64 + 64) * 4;
  for (int step = 0; step < 4; ++step) {
    model.reset_counters();
    const auto got = gradients<WideImpl>(model, x, y);
    const auto want = reference(single, x, y);
    const auto bytes = model.counters().bytes_all_reduced;
    if (step < 2 || size == 1) {  // exact all-reduce before start_powerSGD_iter, and on one rank
      EXPECT_LT(relative_difference(got, want), 1e-5) << "step " << step;
      EXPECT_EQ(bytes, gradient_bytes) << "step " << step;
      continue;
    }
    // P (64 × 1) and Q (64 × 1) for the weight, the bias uncompressed.
    EXPECT_EQ(bytes, (64 + 64 + 64) * 4) << "step " << step;
    EXPECT_GT(relative_difference(got, want), 1e-3) << "a rank-1 approximation of a rank-" << 4 * size << " average";
    for (const auto& g : got) {
      ASSERT_TRUE(torch::isfinite(g).all().item<bool>());
      const auto all = acc::gather(*group, g.unsqueeze(0));
      for (int r = 1; r < size; ++r) EXPECT_TRUE(torch::equal(all[r], all[0])) << "rank " << r << " step " << step;
    }
  }
}

// With a constant gradient, the sum of the approximations over T steps
// misses the sum of the gradients by the last error only (which stays
// bounded), so their mean converges to the gradient; without error feedback
// it stays at the rank-1 approximation.
TEST_F(PowerSgd, ErrorFeedbackRecoversWhatEachStepLeavesOut) {
  if (size == 1) GTEST_SKIP() << "PowerSGD compresses only between several processes";
  const int64_t n = 12;
  const int steps = 120;
  torch::manual_seed(21);
  const auto base = torch::randn({n, n});
  const auto mine = base + 0.1 * torch::randn({n, n}) * (rank + 1);
  const auto average = acc::reduce(*group, mine, "mean");
  double miss_with = 0;
  double miss_without = 0;
  for (const char* feedback : {"true", "false"}) {
    auto net = std::make_shared<ConstantGradientImpl>(n);
    acc::DistributedModel model(net, *group,
                                {.comm_hook = Hook::POWER_SGD,
                                 .comm_state_option = {{"start_powerSGD_iter", "0"},
                                                       {"min_compression_rate", "1"},
                                                       {"use_error_feedback", feedback}}});
    auto sum = torch::zeros({n, n});
    for (int t = 0; t < steps; ++t) {
      net->zero_grad();
      model.forward<ConstantGradientImpl>(mine).backward();
      sum += net->weight.grad();
    }
    const double miss = ((sum / steps - average).norm() / average.norm()).item<double>();
    (std::string(feedback) == "true" ? miss_with : miss_without) = miss;
  }
  EXPECT_LT(miss_with, 0.1);
  EXPECT_GT(miss_without, 0.3);
}

TEST_F(PowerSgd, BadOptionsAreAnErrorOnEveryRank) {
  auto build = [&](acc::DistributedDataParallelKwargs kwargs) {
    return acc::testing::error_of<acc::ConfigError>(
        [&] { acc::DistributedModel m(std::make_shared<NetImpl>(), *group, kwargs); });
  };
  auto unknown = build({.comm_hook = Hook::POWER_SGD, .comm_state_option = {{"matrix_rank", "2"}}});
  EXPECT_NE(unknown.find("'matrix_rank'"), std::string::npos) << unknown;
  auto bad = build({.comm_hook = Hook::BATCHED_POWER_SGD, .comm_state_option = {{"matrix_approximation_rank", "0"}}});
  EXPECT_NE(bad.find("matrix_approximation_rank"), std::string::npos) << bad;
  auto wrapper = build({.comm_hook = Hook::NO, .comm_wrapper = Hook::POWER_SGD});
  EXPECT_NE(wrapper.find("comm_wrapper=power_sgd"), std::string::npos) << wrapper;
  auto stateless = build({.comm_hook = Hook::FP16, .comm_state_option = {{"warm_start", "false"}}});
  EXPECT_NE(stateless.find("comm_state_option"), std::string::npos) << stateless;
}

// comm_wrapper = bf16 around PowerSGD: the messages travel in 16 bits.
TEST_F(PowerSgd, AWrapperCompressesItsMessages) {
  torch::manual_seed(5);
  const auto x = torch::randn({4 * size, 64});
  const auto y = torch::randn({4 * size, 64});
  auto net = std::make_shared<WideImpl>();
  acc::DistributedModel model(net, *group,
                              {.comm_hook = Hook::POWER_SGD,
                               .comm_wrapper = Hook::BF16,
                               .comm_state_option = {{"start_powerSGD_iter", "1"}}});
  gradients<WideImpl>(model, x, y);
  EXPECT_EQ(model.counters().bytes_all_reduced, (64 * 64 + 64) * 2);  // the exact first step, in bf16
  model.reset_counters();
  const auto got = gradients<WideImpl>(model, x, y);
  if (size > 1) EXPECT_EQ(model.counters().bytes_all_reduced, (64 + 64 + 64) * 2);
  for (const auto& g : got) EXPECT_TRUE(torch::isfinite(g).all().item<bool>());
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
