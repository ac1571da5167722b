// ShardedOptimizer (ZeRO stages 1 and 2) at 1, 2 and 4 ranks: training with
// Adam or SGD over two param groups (two learning rates) ends where DDP with the
// whole optimizer ends, within rounding, with the same parameters on every
// rank; each rank's optimizer state is 1/N of the model (plus bucket
// padding); stage 2 reduces each bucket in backward as soon as its gradients
// are ready and releases them (or, asked to, all in step()), accumulates
// locally on micro-steps, and leaves no full gradient behind; unshardable
// optimizers are refused on every rank.
#include "accelerate/training/sharded_optimizer.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/modeling/empty_weights.hpp"
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

enum class Mode { Ddp, Stage1, Stage2, Stage2InStep };
enum class Optimizer { Adam, Sgd };

class ShardedOptimizerTest : public ::testing::Test {
 protected:
  acc::State state;
  std::unique_ptr<acc::ProcessGroup> group = acc::testing::world_group(state);

  // An optimizer over two param groups (fc1 at one rate, fc2+fc3 at another),
  // kSteps steps on this rank's rows of fixed global data; returns the
  // parameters. SGD with momentum sees the gradients' scale; Adam mostly not.
  // With `hybrid`, the shards are over hybrid->node with hybrid->replicas,
  // and a first backward is dropped by zero_grad() before the steps.
  struct Hybrid {
    acc::ProcessGroup* node = nullptr;
    acc::ProcessGroup* replicas = nullptr;
  };
  std::vector<torch::Tensor> train(Mode mode, Optimizer kind, double bucket_cap_mb,
                                   std::int64_t* shard_elements = nullptr, std::int64_t* state_elements = nullptr,
                                   std::optional<Hybrid> hybrid = std::nullopt) {
    const bool stage2 = mode == Mode::Stage2 || mode == Mode::Stage2InStep;
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
    if (!stage2) ddp = std::make_unique<acc::DistributedModel>(net, *group);
    std::unique_ptr<acc::ShardedOptimizer> sharded;
    if (mode != Mode::Ddp) {
      sharded = std::make_unique<acc::ShardedOptimizer>(
          adam, hybrid ? *hybrid->node : *group,
          acc::ShardingOptions{.stage = stage2 ? acc::ZeroStage::Gradients : acc::ZeroStage::OptimizerState,
                               .bucket_cap_mb = bucket_cap_mb,
                               .reduce_in_backward = mode != Mode::Stage2InStep,
                               .replicas = hybrid ? hybrid->replicas : nullptr});
    }
    if (sharded) expect_slices_of_the_parameters(adam, *net);
    torch::manual_seed(5);
    const auto x = torch::randn({kRowsPerRank * group->size(), 7});
    const auto y = torch::randn({kRowsPerRank * group->size(), 3});
    const auto mine = [&](const torch::Tensor& t) { return t.narrow(0, kRowsPerRank * group->rank(), kRowsPerRank); };
    if (hybrid && sharded) {
      (torch::mse_loss(net->forward(mine(x)), mine(y)) * 100).backward();  // a batch skipped after backward
      sharded->zero_grad();
    }
    for (int step = 0; step < kSteps; ++step) {
      auto loss = torch::mse_loss(net->forward(mine(x)), mine(y));
      loss.backward();
      if (sharded) {
        if (mode == Mode::Stage2InStep) {
          for (const auto& p : net->parameters()) EXPECT_TRUE(p.grad().defined());  // local, whole
        }
        if (mode == Mode::Stage2) {
          // Every bucket was reduce-scattered in backward, its gradients released.
          for (const auto& p : net->parameters()) EXPECT_FALSE(p.grad().defined()) << "kept through backward";
        }
        sharded->step();
        if (stage2) {
          for (const auto& p : net->parameters()) EXPECT_FALSE(p.grad().defined()) << "a full gradient was kept";
        }
        sharded->zero_grad();
      } else {
        adam.step();
        adam.zero_grad();
      }
    }
    if (shard_elements != nullptr) *shard_elements = sharded ? sharded->shard_elements() : 0;
    if (sharded) reduced_in_backward = sharded->buckets_reduced_in_backward();
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

  std::int64_t reduced_in_backward = 0;  // by the last train()

  // The optimizer steps ranges of the parameters' own storage: no copy of the weights.
  static void expect_slices_of_the_parameters(torch::optim::Optimizer& optimizer, torch::nn::Module& net) {
    const auto parameters = net.parameters();
    for (const auto& param_group : optimizer.param_groups()) {
      for (const auto& slice : param_group.params()) {
        EXPECT_TRUE(std::any_of(parameters.begin(), parameters.end(),
                                [&](const torch::Tensor& p) { return slice.is_alias_of(p); }))
            << "a slice of " << slice.numel() << " elements is a copy";
      }
    }
    // And the other way: no parameter lives outside the slices' storage (the flat buffer).
    for (const auto& p : parameters) {
      if (p.numel() == 0) continue;
      bool in_buffer = false;
      for (const auto& param_group : optimizer.param_groups()) {
        for (const auto& slice : param_group.params()) in_buffer = in_buffer || p.is_alias_of(slice);
      }
      EXPECT_TRUE(in_buffer) << "a parameter of " << p.numel() << " elements is outside the flat buffer";
    }
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
// groups hold 104 and 88. Buckets are cut at a multiple of N elements, and
// only a group's last bucket is padded to one.
std::int64_t expected_shard(std::int64_t bucket_elements, int ranks) {
  const std::int64_t cap = std::max<std::int64_t>(ranks, bucket_elements / ranks * ranks);
  std::int64_t shard = 0;
  for (const std::int64_t group_total : {104, 88}) {
    for (std::int64_t begin = 0; begin < group_total; begin += cap) {
      shard += (std::min<std::int64_t>(cap, group_total - begin) + ranks - 1) / ranks;
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
    for (const Mode mode : {Mode::Stage2, Mode::Stage2InStep}) {
      SCOPED_TRACE(mode == Mode::Stage2 ? "reduced in backward" : "reduced in step()");
      std::int64_t shard = 0;
      std::int64_t state = 0;
      const auto sharded = train(mode, kind, 100.0 / (1024 * 1024), &shard, &state);
      expect_close(sharded, reference);
      expect_same_on_every_rank(sharded);
      EXPECT_EQ(shard, expected_shard(25, group->size()));
      EXPECT_EQ(state, (kind == Optimizer::Adam ? 2 : 1) * shard);
      // 104 and 88 elements in buckets of 25: 5 + 4 buckets, every step.
      EXPECT_EQ(reduced_in_backward, mode == Mode::Stage2 ? 9 * kSteps : 0);
    }
  }
  // One bucket per group with the default size.
  std::int64_t whole_bucket_shard = 0;
  (void)train(Mode::Stage2, Optimizer::Sgd, 25.0, &whole_bucket_shard);
  EXPECT_EQ(whole_bucket_shard, expected_shard(1 << 20, group->size()));
}

// Six Linear(16, 16) layers of 272 elements, one bucket each.
struct Tower : torch::nn::Module {
  Tower() {
    for (int i = 0; i < 6; ++i) layers.push_back(register_module("l" + std::to_string(i), torch::nn::Linear(16, 16)));
  }
  // `probe` runs when the gradient reaches layer 0's output: layers 1 to 5
  // have accumulated their gradients then, layer 0 not yet.
  torch::Tensor forward(torch::Tensor x, const std::function<void()>& probe) {
    x = layers[0]->forward(x);
    x.register_hook([probe](const torch::Tensor&) { probe(); });
    for (std::size_t i = 1; i < layers.size(); ++i) x = layers[i]->forward(torch::tanh(x));
    return x;
  }
  std::vector<torch::nn::Linear> layers;
};

TEST_F(ShardedOptimizerTest, Stage2HoldsNoWholeGradientOfAReducedBucketDuringBackward) {
  constexpr double kLayerMiB = 272.0 * 4 / (1024 * 1024);  // exact: 17 / 2^14
  for (const bool in_backward : {true, false}) {
    SCOPED_TRACE(in_backward ? "reduced in backward" : "reduced in step()");
    torch::manual_seed(3);
    auto tower = std::make_shared<Tower>();
    torch::optim::SGD sgd(tower->parameters(), torch::optim::SGDOptions(0.1));
    acc::ShardedOptimizer sharded(sgd, *group,
                                  {.stage = acc::ZeroStage::Gradients,
                                   .bucket_cap_mb = kLayerMiB,
                                   .reduce_in_backward = in_backward});
    int held = -1;
    std::int64_t input_bytes = -1;
    const auto count_held = [&] {
      held = 0;
      for (const auto& p : tower->parameters()) held += p.grad().defined() ? 1 : 0;
      input_bytes = sharded.bucket_input_bytes();
    };
    for (int step = 0; step < 2; ++step) {
      tower->forward(torch::randn({4, 16}), count_held).square().sum().backward();
      // Reduced in backward: layers 5 to 1 were five buckets, reduced and
      // released as each completed. In step(): all ten tensors are whole.
      EXPECT_EQ(held, in_backward ? 0 : 10);
      // Nor are their copies: at most two bucket inputs (those in flight) remain.
      EXPECT_LE(input_bytes, 2 * 272 * 4);
      sharded.step();
      EXPECT_EQ(sharded.bucket_input_bytes(), 0);
      sharded.zero_grad();
    }
    EXPECT_EQ(sharded.buckets_reduced_in_backward(), in_backward ? 12 : 0);
  }
}

TEST_F(ShardedOptimizerTest, Stage2AccumulatesMicroStepsLocallyAndRefusesASecondGradientOtherwise) {
  // Two micro-batches per step: the first only accumulates (sync_in_backward
  // false), the second reduces in backward. It ends where reducing everything
  // in step() ends.
  const auto run = [&](bool in_backward) {
    torch::manual_seed(8);
    auto net = std::make_shared<Net>(4);
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    bool sync = true;
    acc::ShardedOptimizer sharded(sgd, *group,
                                  {.stage = acc::ZeroStage::Gradients,
                                   .bucket_cap_mb = 100.0 / (1024 * 1024),
                                   .reduce_in_backward = in_backward,
                                   .sync_in_backward = [&sync] { return sync; }});
    const auto x = torch::randn({4 * group->size(), 7});
    const auto y = torch::randn({4 * group->size(), 3});
    for (int step = 0; step < 3; ++step) {
      for (int micro = 0; micro < 2; ++micro) {
        sync = micro == 1;
        const auto rows = [&](const torch::Tensor& t) { return t.narrow(0, 4 * group->rank() + 2 * micro, 2); };
        torch::mse_loss(net->forward(rows(x)), rows(y)).backward();
        if (micro == 0) {
          for (const auto& p : net->parameters()) EXPECT_TRUE(p.grad().defined()) << "accumulated locally";
        }
      }
      sharded.step();
      sharded.zero_grad();
    }
    EXPECT_EQ(sharded.buckets_reduced_in_backward(), in_backward ? 3 * 8 : 0);  // 192 elements, buckets of 25
    std::vector<torch::Tensor> result;
    for (const auto& p : net->parameters()) result.push_back(p.detach().clone());
    return result;
  };
  expect_close(run(true), run(false));

  // Without saying that the first backward only accumulates, the second
  // gradient of a reduced bucket is refused, on every rank.
  auto net = std::make_shared<Net>(4);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  acc::ShardedOptimizer sharded(sgd, *group, {.stage = acc::ZeroStage::Gradients});
  net->forward(torch::ones({2, 7})).sum().backward();
  const auto message = acc::testing::error_of<acc::ConfigError>([&] {
    net->forward(torch::ones({2, 7})).sum().backward();
  });
  EXPECT_NE(message.find("received a second gradient before step()"), std::string::npos) << message;
}

TEST_F(ShardedOptimizerTest, AParameterWhoseDataWasReplacedIsTakenBackIntoTheShards) {
  for (const acc::ZeroStage stage : {acc::ZeroStage::OptimizerState, acc::ZeroStage::Gradients}) {
    auto net = std::make_shared<Net>(2);
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
    acc::ShardedOptimizer sharded(sgd, *group, {.stage = stage, .bucket_cap_mb = 64.0 / (1024 * 1024)});
    {
      torch::NoGradGuard no_grad;
      net->fc1->weight.set_data(torch::full({13, 7}, 0.5));  // new storage, not the shards'
    }
    sharded.step();  // no gradients: SGD leaves the parameters as they are
    EXPECT_TRUE(torch::equal(net->fc1->weight, torch::full({13, 7}, 0.5)));
    expect_slices_of_the_parameters(sgd, *net);
    // And the shards step it: one backward, one step, the same on every rank.
    net->forward(torch::ones({2, 7})).sum().backward();
    sharded.step();
    EXPECT_FALSE(torch::equal(net->fc1->weight, torch::full({13, 7}, 0.5)));
    expect_same_on_every_rank({net->fc1->weight.detach().clone()});
    // A parameter moved to another dtype cannot be stepped in the shards' dtype.
    {
      torch::NoGradGuard no_grad;
      net->fc2->bias.set_data(net->fc2->bias.to(torch::kDouble));
    }
    auto message = acc::testing::error_of<acc::ConfigError>([&] { sharded.step(); });
    EXPECT_NE(message.find("changed dtype or device after sharding"), std::string::npos) << message;
    // Nor can one of another size fit its range: the next parameters' would be overwritten.
    {
      torch::NoGradGuard no_grad;
      net->fc2->bias.set_data(torch::zeros({6}));
    }
    message = acc::testing::error_of<acc::ConfigError>([&] { sharded.step(); });
    EXPECT_NE(message.find("changed size after sharding (now 6 elements, was 5)"), std::string::npos) << message;
  }
}

TEST_F(ShardedOptimizerTest, AParamGroupOfEmptyParametersHasNoBucketAndSteps) {
  for (const acc::ZeroStage stage : {acc::ZeroStage::OptimizerState, acc::ZeroStage::Gradients}) {
    auto net = std::make_shared<Net>(6);
    auto empty = torch::zeros({0, 4}, torch::requires_grad());
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{empty});
    groups.emplace_back(net->parameters());
    torch::optim::SGD sgd(groups, torch::optim::SGDOptions(0.1));
    acc::ShardedOptimizer sharded(sgd, *group, {.stage = stage});
    const auto before = net->fc1->weight.detach().clone();
    net->forward(torch::ones({2, 7})).sum().backward();
    // Clipping skips the group that holds no gradient.
    EXPECT_GT(sharded.clip_grad_norm_(1e6), 0.0);
    EXPECT_GT(sharded.clip_grad_norm_(1e6, std::numeric_limits<double>::infinity()), 0.0);
    sharded.clip_grad_value_(1e6);
    sharded.step();
    EXPECT_FALSE(torch::equal(net->fc1->weight, before));
    EXPECT_EQ(empty.sizes(), (std::vector<std::int64_t>{0, 4}));
  }
}

// y = tanh(x w^T + b) w^T: one weight used twice, and listed twice, as
// LibTorch's parameters() lists a tied weight under each of its names.
struct TiedWeights {
  torch::Tensor w = torch::randn({4, 4}).requires_grad_();
  torch::Tensor b = torch::randn({4}).requires_grad_();
  torch::Tensor forward(const torch::Tensor& x) const { return torch::tanh(x.matmul(w.t()) + b).matmul(w.t()); }
};

TEST_F(ShardedOptimizerTest, ATiedWeightListedTwiceIsSteppedOnceWithItsWholeGradient) {
  // Every rank has the same data, so each step must equal a plain SGD step over
  // the two distinct tensors.
  const auto x = torch::randn({3, 4});
  const auto run = [&](std::optional<acc::ZeroStage> stage) {
    torch::manual_seed(21);
    TiedWeights net;
    std::vector<torch::Tensor> listed{net.w, net.b};
    if (stage) listed.push_back(net.w);
    torch::optim::SGD sgd(listed, torch::optim::SGDOptions(0.1).momentum(0.9));
    std::unique_ptr<acc::ShardedOptimizer> sharded;
    if (stage)
      sharded = std::make_unique<acc::ShardedOptimizer>(sgd, *group,
                                                        acc::ShardingOptions{.stage = *stage,
                                                                             .bucket_cap_mb = 8.0 / (1024 * 1024)});
    for (int step = 0; step < 3; ++step) {
      net.forward(x).square().sum().backward();
      if (sharded) {
        sharded->step();
        sharded->zero_grad();
      } else {
        sgd.step();
        sgd.zero_grad();
      }
    }
    return std::vector<torch::Tensor>{net.w.detach().clone(), net.b.detach().clone()};
  };
  const auto expected = run(std::nullopt);
  for (const auto stage : {acc::ZeroStage::OptimizerState, acc::ZeroStage::Gradients}) {
    SCOPED_TRACE(stage == acc::ZeroStage::Gradients ? "stage 2" : "stage 1");
    expect_close(run(stage), expected);
  }
  // A tensor in two param groups has no one shard to live in.
  TiedWeights net;
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{net.w});
  groups.emplace_back(std::vector<torch::Tensor>{net.b, net.w});
  torch::optim::SGD sgd(groups, torch::optim::SGDOptions(0.1));
  const auto message = acc::testing::error_of<acc::ConfigError>([&] { acc::ShardedOptimizer s(sgd, *group); });
  EXPECT_NE(message.find("is also in param group 0"), std::string::npos) << message;
}

// Net(9) under SGD, sharded in stage 2 over `group` in buckets of 10 floats,
// reduced in backward or (in_backward false) all in step().
struct Stage2Sgd {
  Stage2Sgd(acc::ProcessGroup& group, bool in_backward)
      : sgd(net->parameters(), torch::optim::SGDOptions(0.1)),
        sharded(sgd, group,
                {.stage = acc::ZeroStage::Gradients,
                 .bucket_cap_mb = 40.0 / (1024 * 1024),
                 .reduce_in_backward = in_backward}) {}
  std::shared_ptr<Net> net = std::make_shared<Net>(9);
  torch::optim::SGD sgd;
  acc::ShardedOptimizer sharded;
};

// One backward in which odd ranks leave fc1 unused, then a collective before
// step() (a loss all-reduce), which must meet its peers on every rank.
void backward_with_fc1_unused_on_odd_ranks(Net& net, acc::ProcessGroup& group) {
  const auto x = torch::full({2, 7}, 0.1 * (group.rank() + 1));
  const auto hidden = group.rank() % 2 == 0 ? torch::tanh(net.fc1->forward(x)) : torch::zeros({2, 13});
  net.fc3->forward(torch::tanh(net.fc2->forward(hidden))).sum().backward();
  auto ones = torch::ones({3});
  group.all_reduce(ones);
  EXPECT_TRUE(torch::equal(ones, torch::full({3}, static_cast<float>(group.size()))));
}

std::vector<torch::Tensor> parameters_of(torch::nn::Module& net) {
  std::vector<torch::Tensor> out;
  for (const auto& p : net.parameters()) out.push_back(p.detach().clone());
  return out;
}

TEST_F(ShardedOptimizerTest, GradientsDroppedByZeroGradBeforeStepAreGone) {
  // A batch skipped after its backward: zero_grad() drops what stage 2 took
  // in backward, and the next backward is reduced on its own.
  const auto x = torch::randn({2, 7});
  const auto run = [&](bool skip_one) {
    auto net = std::make_shared<Net>(5);
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
    acc::ShardedOptimizer sharded(sgd, *group,
                                  {.stage = acc::ZeroStage::Gradients, .bucket_cap_mb = 100.0 / (1024 * 1024)});
    if (skip_one) {
      (net->forward(x).sum() * 100).backward();
      sharded.zero_grad();
    }
    net->forward(x).sum().backward();
    sharded.step();
    return parameters_of(*net);
  };
  expect_close(run(true), run(false));
}

TEST_F(ShardedOptimizerTest, AParameterUnusedOnOneRankLeavesNoCollectiveBehindBackward) {
  // Odd ranks never use fc1. Every bucket is launched before backward returns
  // on every rank, so a collective made between backward and step() (a loss
  // all-reduce) meets its peers and the step is the one reduced in step().
  const auto run = [&](bool in_backward) {
    Stage2Sgd trained(*group, in_backward);
    auto& [net, sgd, sharded] = trained;
    for (int step = 0; step < 2; ++step) {
      backward_with_fc1_unused_on_odd_ranks(*net, *group);
      sharded.step();
      sharded.zero_grad();
    }
    return parameters_of(*net);
  };
  expect_close(run(true), run(false));
}

TEST_F(ShardedOptimizerTest, ABackwardThatThrewLeavesTheNextOneLaunchingEverything) {
  // A backward that throws part way never runs its end-of-backward callback.
  // After the step that follows, the next backward must queue its own, or a
  // rank that leaves fc1 unused would launch its buckets only in step().
  const auto run = [&](bool in_backward) {
    Stage2Sgd trained(*group, in_backward);
    auto& [net, sgd, sharded] = trained;
    const auto x = torch::full({2, 7}, 0.1 * (group->rank() + 1));
    auto hidden = net->fc2->forward(torch::tanh(net->fc1->forward(x)));
    hidden.register_hook([](const torch::Tensor&) -> torch::Tensor { throw std::runtime_error("injected"); });
    EXPECT_THROW(net->fc3->forward(torch::tanh(hidden)).sum().backward(), std::exception);
    sharded.step();  // what fc3 had taken, reduced; no zero_grad() in between
    backward_with_fc1_unused_on_odd_ranks(*net, *group);
    sharded.step();
    return parameters_of(*net);
  };
  expect_close(run(true), run(false));
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

  // Parameters never loaded have no values to shard.
  auto empty = acc::init_empty_weights([] { return std::make_shared<Net>(1); });
  torch::optim::Adam adam(empty->parameters());
  message = acc::testing::error_of<acc::ConfigError>([&] { acc::ShardedOptimizer s(adam, *group); });
  EXPECT_NE(message.find("is on the meta device"), std::string::npos) << message;
}

TEST_F(ShardedOptimizerTest, ReplicasHoldingAnotherPlaceInTheirGroupAreRefusedOnEveryRank) {
  if (state.num_processes() < 2) GTEST_SKIP() << "needs a group of 2 ranks and replicas";
  // Groups of two (emulated nodes), with the world as the "replicas": rank 0
  // of a group would average its slice with slices of rank 1.
  acc::StateOptions two_per_node;
  two_per_node.emulated_ranks_per_node = 2;
  const acc::State nodes(two_per_node);
  auto node = acc::ProcessGroup::node(nodes);
  auto net = std::make_shared<Net>(1);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  const auto message = acc::testing::error_of<acc::ConfigError>(
      [&] { acc::ShardedOptimizer s(sgd, *node, {.stage = acc::ZeroStage::Gradients, .replicas = group.get()}); });
  EXPECT_NE(message.find("same place"), std::string::npos) << message;
  // The node's cross-node group is what replicas are: accepted.
  auto cross = acc::ProcessGroup::cross_node(nodes);
  EXPECT_NO_THROW(acc::ShardedOptimizer(sgd, *node, {.stage = acc::ZeroStage::Gradients, .replicas = cross.get()}));
}

TEST_F(ShardedOptimizerTest, NodesOfDifferentSizesAreRefusedOnEveryRank) {
  if (state.num_processes() != 4) GTEST_SKIP() << "needs 4 ranks: nodes of 3 and 1";
  acc::StateOptions three_per_node;
  three_per_node.emulated_ranks_per_node = 3;
  const acc::State nodes(three_per_node);
  auto node = acc::ProcessGroup::node(nodes);
  auto cross = acc::ProcessGroup::cross_node(nodes);  // a group of one for local ranks 1 and 2
  auto net = std::make_shared<Net>(1);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  const auto message = acc::testing::error_of<acc::ConfigError>(
      [&] { acc::ShardedOptimizer s(sgd, *node, {.stage = acc::ZeroStage::Gradients, .replicas = cross.get()}); });
  EXPECT_NE(message.find("same number of ranks"), std::string::npos) << message;
}

// Replicas through MPI alone: the node's reduce-scatters complete at each
// rank's own pace, yet every rank posts its cross-node all-reduces at the
// same points, so a backward dropped by zero_grad() and the steps after it
// pair no different collectives (a mismatch would hang until the deadline),
// and the run ends where DDP ends.
TEST_F(ShardedOptimizerTest, ReplicasThroughMpiSurviveABackwardDroppedBeforeStep) {
  acc::StateOptions layout;
  layout.emulated_ranks_per_node = std::max(1, state.num_processes() / 2);
  const acc::State nodes(layout);
  const acc::ProcessGroupOptions mpi_only{.timeout = std::chrono::seconds(60), .shared_memory_all_reduce = false};
  auto node = acc::ProcessGroup::node(nodes, mpi_only);
  auto cross = acc::ProcessGroup::cross_node(nodes, mpi_only);
  const double bucket = 40.0 * sizeof(float) / (1024 * 1024);  // buckets of 40 elements: several in flight
  const auto ddp = train(Mode::Ddp, Optimizer::Sgd, bucket);
  const auto hybrid = train(Mode::Stage2, Optimizer::Sgd, bucket, nullptr, nullptr, Hybrid{node.get(), cross.get()});
  expect_close(hybrid, ddp);
  expect_same_on_every_rank(hybrid);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
