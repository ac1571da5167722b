// ShardedOptimizer (ZeRO stages 1 and 2) at 1, 2 and 4 ranks: training with
// Adam or SGD over two param groups (two learning rates) ends where DDP with the
// whole optimizer ends, within rounding, with the same parameters on every
// rank; each rank's optimizer state is 1/N of the model (plus bucket
// padding); stage 2 leaves no full gradient behind; unshardable optimizers
// are refused on every rank.
#include "accelerate/training/sharded_optimizer.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/training/distributed_model.hpp"
#include "common/odd_sized_net.hpp"
#include "common/test_helpers.hpp"
#include "common/world_group.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;

using Net = acc::testing::OddSizedNet;

constexpr int kSteps = 5;
constexpr std::int64_t kRowsPerRank = 6;

enum class Mode { Ddp, Stage1, Stage2 };
enum class Optimizer { Adam, Sgd };

class ShardedOptimizerTest : public ::testing::Test {
 protected:
  acc::State state;
  std::unique_ptr<acc::ProcessGroup> group = acc::testing::world_group(state);

  // An optimizer over two param groups (fc1 at one rate, fc2+fc3 at another),
  // kSteps steps on this rank's rows of fixed global data; returns the
  // parameters. SGD with momentum sees the gradients' scale; Adam mostly not.
  std::vector<torch::Tensor> train(Mode mode, Optimizer kind, double bucket_cap_mb,
                                   std::int64_t* shard_elements = nullptr, std::int64_t* state_elements = nullptr) {
    auto net = std::make_shared<Net>(11);
    std::vector<torch::Tensor> rest = net->fc2->parameters();
    for (const auto& p : net->fc3->parameters()) rest.push_back(p);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    if (kind == Optimizer::Adam) {
      groups.emplace_back(net->fc1->parameters(), std::make_unique<torch::optim::AdamOptions>(0.02));
      groups.emplace_back(rest, std::make_unique<torch::optim::AdamOptions>(0.005));
      optimizer = std::make_unique<torch::optim::Adam>(groups, torch::optim::AdamOptions(0.01).weight_decay(0.01));
    } else {
      groups.emplace_back(net->fc1->parameters(),
                          std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(0.2).momentum(0.9)));
      groups.emplace_back(rest,
                          std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(0.05).momentum(0.5)));
      optimizer = std::make_unique<torch::optim::SGD>(groups, torch::optim::SGDOptions(0.1).weight_decay(0.01));
    }
    torch::optim::Optimizer& adam = *optimizer;  // the optimizer under test
    std::unique_ptr<acc::DistributedModel> ddp;
    if (mode != Mode::Stage2) ddp = std::make_unique<acc::DistributedModel>(net, *group);
    std::unique_ptr<acc::ShardedOptimizer> sharded;
    if (mode != Mode::Ddp) {
      sharded =
          std::make_unique<acc::ShardedOptimizer>(adam, *group,
                                                  acc::ShardingOptions{.stage = mode == Mode::Stage1
                                                                                    ? acc::ZeroStage::OptimizerState
                                                                                    : acc::ZeroStage::Gradients,
                                                                       .bucket_cap_mb = bucket_cap_mb});
    }
    torch::manual_seed(5);
    const auto x = torch::randn({kRowsPerRank * group->size(), 7});
    const auto y = torch::randn({kRowsPerRank * group->size(), 3});
    const auto mine = [&](const torch::Tensor& t) { return t.narrow(0, kRowsPerRank * group->rank(), kRowsPerRank); };
    for (int step = 0; step < kSteps; ++step) {
      auto loss = torch::mse_loss(net->forward(mine(x)), mine(y));
      loss.backward();
      if (sharded) {
        if (mode == Mode::Stage2) {
          for (const auto& p : net->parameters()) EXPECT_TRUE(p.grad().defined());  // local, whole
        }
        sharded->step();
        if (mode == Mode::Stage2) {
          for (const auto& p : net->parameters()) EXPECT_FALSE(p.grad().defined()) << "a full gradient was kept";
        }
        sharded->zero_grad();
      } else {
        adam.step();
        adam.zero_grad();
      }
    }
    if (shard_elements != nullptr) *shard_elements = sharded ? sharded->shard_elements() : 0;
    if (state_elements != nullptr) {
      *state_elements = 0;
      for (const auto& [key, param_state] : adam.state()) {
        if (kind == Optimizer::Adam) {
          const auto& s = static_cast<const torch::optim::AdamParamState&>(*param_state);
          *state_elements += s.exp_avg().numel() + s.exp_avg_sq().numel();
        } else {
          *state_elements += static_cast<const torch::optim::SGDParamState&>(*param_state).momentum_buffer().numel();
        }
      }
    }
    std::vector<torch::Tensor> result;
    for (const auto& p : net->parameters()) result.push_back(p.detach().clone());
    return result;
  }

  void expect_same_on_every_rank(const std::vector<torch::Tensor>& parameters) {
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const auto all = group->all_gather(parameters[i].reshape({1, -1}));
      for (int r = 1; r < group->size(); ++r) EXPECT_TRUE(torch::equal(all[r], all[0])) << "parameter " << i;
    }
  }
};

void expect_close(const std::vector<torch::Tensor>& actual, const std::vector<torch::Tensor>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_TRUE(torch::allclose(actual[i], expected[i], 1e-5, 1e-6))
        << "parameter " << i << ": largest difference " << (actual[i] - expected[i]).abs().max().item<double>();
  }
}

// fc1 7*13+13 = 104 elements, fc2 13*5+5 = 70 and fc3 5*3+3 = 18: the
// groups hold 104 and 88. Each bucket is padded to a multiple of N.
std::int64_t expected_shard(std::int64_t bucket_elements, int ranks) {
  std::int64_t shard = 0;
  for (const std::int64_t group_total : {104, 88}) {
    for (std::int64_t begin = 0; begin < group_total; begin += bucket_elements) {
      shard += (std::min<std::int64_t>(bucket_elements, group_total - begin) + ranks - 1) / ranks;
    }
  }
  return shard;
}

TEST_F(ShardedOptimizerTest, Stage1EndsWhereDdpEndsWithAShardOfTheState) {
  for (const Optimizer kind : {Optimizer::Adam, Optimizer::Sgd}) {
    SCOPED_TRACE(kind == Optimizer::Adam ? "Adam" : "SGD");
    const auto reference = train(Mode::Ddp, kind, 0);
    std::int64_t shard = 0;
    std::int64_t state = 0;
    // 64 bytes per bucket: 16 floats, so parameters span buckets and ranks.
    const auto sharded = train(Mode::Stage1, kind, 64.0 / (1024 * 1024), &shard, &state);
    expect_close(sharded, reference);
    expect_same_on_every_rank(sharded);
    EXPECT_EQ(shard, expected_shard(16, group->size()));
    EXPECT_LE(shard, 192 / group->size() + 13);
    EXPECT_EQ(state, (kind == Optimizer::Adam ? 2 : 1) * shard);  // the state of the shard only
  }
}

TEST_F(ShardedOptimizerTest, Stage2ReduceScattersTheGradientsAndEndsWhereDdpEnds) {
  for (const Optimizer kind : {Optimizer::Adam, Optimizer::Sgd}) {
    SCOPED_TRACE(kind == Optimizer::Adam ? "Adam" : "SGD");
    const auto reference = train(Mode::Ddp, kind, 0);
    std::int64_t shard = 0;
    std::int64_t state = 0;
    const auto sharded = train(Mode::Stage2, kind, 100.0 / (1024 * 1024), &shard, &state);
    expect_close(sharded, reference);
    expect_same_on_every_rank(sharded);
    EXPECT_EQ(shard, expected_shard(25, group->size()));
    EXPECT_EQ(state, (kind == Optimizer::Adam ? 2 : 1) * shard);
  }
  // One bucket per group with the default size.
  std::int64_t whole_bucket_shard = 0;
  (void)train(Mode::Stage2, Optimizer::Sgd, 25.0, &whole_bucket_shard);
  EXPECT_EQ(whole_bucket_shard, expected_shard(1 << 20, group->size()));
}

TEST_F(ShardedOptimizerTest, UnshardableOptimizersAreRefusedWithTheReason) {
  auto net = std::make_shared<Net>(1);
  torch::optim::LBFGS lbfgs(net->parameters(), torch::optim::LBFGSOptions(0.1));
  auto message = acc::testing::error_of<acc::ConfigError>([&] { acc::ShardedOptimizer s(lbfgs, *group); });
  EXPECT_NE(message.find("LBFGS"), std::string::npos) << message;

  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  net->forward(torch::ones({1, 7})).sum().backward();
  sgd.step();  // momentum buffers for the whole parameters now exist
  message = acc::testing::error_of<acc::ConfigError>([&] { acc::ShardedOptimizer s(sgd, *group); });
  EXPECT_NE(message.find("before its first step"), std::string::npos) << message;
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
