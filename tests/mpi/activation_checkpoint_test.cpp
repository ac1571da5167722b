// Activation checkpointing (accelerate::activation_checkpoint and
// ShardedUnitScope::checkpoint) at 1 and 2 ranks:
//  - in one process, a residual MLP block with dropout gives the same loss and
//    parameter gradients with and without checkpointing, plain and under CPU
//    bf16 autocast, its body running twice per step (once without a graph);
//    a weight used in the body and again after it in one autocast region
//    gets both gradients;
//    a weight registered twice in the module gets its gradient once;
//  - a body that reads a parameter of another module, or an activation it was
//    not given, is a ConfigError in backward rather than a lost gradient;
//  - under the Accelerator with DDP (NO_SHARD), a model with a weight tied
//    across a checkpointed and a plain part trains as without checkpointing;
//  - FULL_SHARD with FullShardOptions::activation_checkpointing (directly, or
//    through DistributedModelOptions as the Accelerator builds it) recomputes
//    each unit's body inside its backward and trains as without (a block
//    model with dropout, and the GPT of jobs/gpt); a checkpointing unit that
//    holds another unit is refused;
//  - the FSDP plugin accepts activation_checkpointing with FULL_SHARD and
//    refuses it where no unit is live, pointing at activation_checkpoint().
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "accelerate/amp/autocast.hpp"
#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/training/accelerator.hpp"
#include "accelerate/training/activation_checkpoint.hpp"
#include "accelerate/training/distributed_model.hpp"
#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"
#include "accelerate/training/fully_sharded_model.hpp"
#include "accelerate/training/sharded_unit_scope.hpp"
#include "common/gpu_skip.hpp"
#include "common/test_helpers.hpp"
#include "common/world_group.hpp"
#include "../../jobs/gpt/gpt_model.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
using acc::testing::world_rank;
using acc::testing::world_size;

constexpr std::int64_t kDim = 8;

// What a transformer block's MLP half is: x + W2 dropout(gelu(W1 x)).
struct MlpBlockImpl : torch::nn::Module {
  MlpBlockImpl()
      : fc(register_module("fc", torch::nn::Linear(kDim, 4 * kDim))),
        proj(register_module("proj", torch::nn::Linear(4 * kDim, kDim))),
        drop(register_module("drop", torch::nn::Dropout(0.3))) {}
  torch::Tensor body(const torch::Tensor& x) {
    ++calls;
    grad_modes.push_back(torch::GradMode::is_enabled());
    return x + drop(proj(torch::gelu(fc(x))));
  }
  torch::nn::Linear fc, proj;
  torch::nn::Dropout drop;
  int calls = 0;
  std::vector<bool> grad_modes;  // GradMode in each run of the body
};
TORCH_MODULE(MlpBlock);

struct StepResult {
  torch::Tensor loss;
  std::vector<torch::Tensor> grads;
};

// Two steps of a block (dropout on), checkpointed or not, from the same seeds.
std::vector<StepResult> run_block(bool checkpointed, bool autocast = false) {
  torch::manual_seed(5);
  MlpBlock block;
  std::vector<StepResult> steps;
  for (int step = 0; step < 2; ++step) {
    torch::manual_seed(100 + step);
    const torch::Tensor x = torch::randn({6, kDim}, torch::requires_grad());
    torch::Tensor y;
    {
      std::optional<acc::AutocastGuard> region;
      if (autocast) region.emplace(c10::DeviceType::CPU, torch::kBFloat16);
      const auto body = [b = block.ptr()](const torch::Tensor& h) { return b->body(h); };
      y = checkpointed ? acc::activation_checkpoint(*block, body, x) : body(x);
    }
    // Draws after the forward: the recompute must leave the generator as it found it.
    const torch::Tensor loss = (y.to(torch::kFloat) * torch::rand_like(y, torch::kFloat)).sum();
    block->zero_grad();
    loss.backward();
    StepResult result{loss.detach(), {x.grad().clone()}};
    for (const auto& p : block->parameters()) result.grads.push_back(p.grad().clone());
    result.grads.push_back(torch::rand({3}));  // the generator's state after backward
    steps.push_back(std::move(result));
  }
  const int expected_calls = checkpointed ? 4 : 2;
  EXPECT_EQ(block->calls, expected_calls);
  if (checkpointed) {
    // The first run of each step keeps no graph; the recompute in backward does.
    EXPECT_EQ(block->grad_modes, (std::vector<bool>{false, true, false, true}));
  }
  return steps;
}

void expect_same_steps(const std::vector<StepResult>& actual, const std::vector<StepResult>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t s = 0; s < expected.size(); ++s) {
    EXPECT_TRUE(torch::allclose(actual[s].loss, expected[s].loss, 1e-6, 1e-6)) << "the loss of step " << s;
    ASSERT_EQ(actual[s].grads.size(), expected[s].grads.size());
    for (std::size_t g = 0; g < expected[s].grads.size(); ++g) {
      EXPECT_TRUE(torch::allclose(actual[s].grads[g], expected[s].grads[g], 1e-6, 1e-7))
          << "step " << s << ", gradient " << g << " differs by "
          << (actual[s].grads[g] - expected[s].grads[g]).abs().max().item<double>();
    }
  }
}

TEST(ActivationCheckpoint, GivesTheGradientsOfThePlainForwardRunningTheBodyTwice) {
  expect_same_steps(run_block(true), run_block(false));
}

TEST(ActivationCheckpoint, RecomputesUnderTheAutocastOfTheForward) {
  expect_same_steps(run_block(true, /*autocast=*/true), run_block(false, /*autocast=*/true));
}

TEST(ActivationCheckpoint, AWeightUsedInsideAndAfterTheBodyInOneAutocastRegion) {
  // Autocast caches a weight's bf16 copy at its first use in the region: the
  // body's run without a graph must not leave one there for the later use.
  torch::manual_seed(7);
  torch::nn::Linear a(kDim, kDim);
  const torch::Tensor x = torch::randn({3, kDim});
  const auto grad_of = [&](bool checkpointed) {
    a->zero_grad();
    torch::Tensor y;
    {
      const acc::AutocastGuard region(c10::DeviceType::CPU, torch::kBFloat16);
      const auto body = [a = a.ptr()](const torch::Tensor& h) { return a->forward(h); };
      y = checkpointed ? acc::activation_checkpoint(*a, body, x) : body(x);
      y = a->forward(torch::tanh(y));  // the same weight again, with a graph
    }
    y.to(torch::kFloat).square().sum().backward();
    return a->weight.grad().clone();
  };
  const torch::Tensor expected = grad_of(false);
  EXPECT_TRUE(torch::allclose(grad_of(true), expected, 1e-6, 1e-7));
}

TEST(ActivationCheckpoint, WithoutGradientsTheBodyJustRuns) {
  MlpBlock block;
  block->eval();
  const torch::Tensor x = torch::randn({2, kDim}, torch::requires_grad());
  const torch::NoGradGuard no_grad;
  const torch::Tensor y = acc::activation_checkpoint(
      *block, [b = block.ptr()](const torch::Tensor& h) { return b->body(h); }, x);
  EXPECT_EQ(block->calls, 1);
  EXPECT_FALSE(y.requires_grad());
}

TEST(ActivationCheckpoint, VectorAndTupleResults) {
  torch::manual_seed(2);
  torch::nn::Linear a(kDim, kDim), b(kDim, kDim);
  auto both = std::make_shared<torch::nn::Module>();
  both->register_module("a", a);
  both->register_module("b", b);
  const torch::Tensor x = torch::randn({3, kDim});
  const auto pair = acc::activation_checkpoint(
      *both,
      [a = a.ptr(), b = b.ptr()](const torch::Tensor& h) { return std::make_tuple(a->forward(h), b->forward(h)); }, x);
  const auto list = acc::activation_checkpoint(
      *both,
      [a = a.ptr(), b = b.ptr()](const torch::Tensor& h) {
        return std::vector<torch::Tensor>{a->forward(h), b->forward(h)};
      },
      x);
  (std::get<0>(pair).sum() + 2 * std::get<1>(pair).sum()).backward();
  const torch::Tensor first = b->weight.grad().clone();
  both->zero_grad();
  (list[0].sum() + 2 * list[1].sum()).backward();
  EXPECT_TRUE(torch::allclose(b->weight.grad(), first));
  EXPECT_TRUE(torch::allclose(b->weight.grad(), 2 * x.sum(0).expand({kDim, kDim})));
}

TEST(ActivationCheckpoint, ATiedWeightRegisteredTwiceGetsItsGradientOnce) {
  torch::manual_seed(6);
  torch::nn::Linear a(kDim, kDim);
  auto tied = std::make_shared<torch::nn::Module>();
  tied->register_module("a", a);
  tied->register_parameter("again", a->weight);  // parameters() lists it twice
  ASSERT_EQ(tied->parameters().size(), 3U);
  const torch::Tensor x = torch::randn({3, kDim});
  const auto body = [a = a.ptr()](const torch::Tensor& h) { return torch::tanh(a->forward(h)).sum(); };
  body(x).backward();
  const torch::Tensor expected = a->weight.grad().clone();
  tied->zero_grad();
  acc::activation_checkpoint(*tied, body, x).backward();
  EXPECT_TRUE(torch::allclose(a->weight.grad(), expected, 1e-6, 1e-7));
}

TEST(ActivationCheckpoint, ABodyReadingAnotherModulesParameterIsAConfigError) {
  MlpBlock block;
  torch::nn::Linear other(kDim, 3);
  const torch::Tensor x = torch::randn({2, kDim}, torch::requires_grad());
  const torch::Tensor y = acc::activation_checkpoint(
      *block, [b = block.ptr(), o = other.ptr()](const torch::Tensor& h) { return o->forward(b->body(h)); }, x);
  const std::string message = acc::testing::error_of([&] { y.sum().backward(); });
  EXPECT_NE(message.find("[3, 8]"), std::string::npos) << message;
  EXPECT_NE(message.find("Pass the module that owns it"), std::string::npos) << message;
  EXPECT_NE(message.find("[rank "), std::string::npos) << message;

  // An activation of the outer graph read without being passed.
  const torch::Tensor outside = other(x);
  const torch::Tensor z = acc::activation_checkpoint(
      *block, [b = block.ptr(), outside](const torch::Tensor& h) { return b->body(h).sum() + outside.sum(); }, x);
  EXPECT_NE(acc::testing::error_of([&] { z.backward(); }).find("not passed to it"), std::string::npos);
}

// --- under the Accelerator (DDP) -------------------------------------------

constexpr std::int64_t kVocab = 11;

// A language model whose head is tied to the embedding; the block and the
// head run checkpointed (the head's weight thus gets a gradient from inside a
// checkpoint and one from the embedding outside it).
struct TiedHeadImpl : torch::nn::Module {
  explicit TiedHeadImpl(const torch::Tensor& tied) { weight = register_parameter("weight", tied); }
  torch::Tensor forward(const torch::Tensor& x) { return torch::linear(torch::tanh(x), weight); }
  torch::Tensor weight;
};
TORCH_MODULE(TiedHead);

struct TiedLmImpl : torch::nn::Module {
  explicit TiedLmImpl(bool checkpointed) : checkpointed(checkpointed) {
    torch::manual_seed(8);
    wte = register_module("wte", torch::nn::Embedding(kVocab, kDim));
    block = register_module("block", MlpBlock());
    head = register_module("head", TiedHead(wte->weight));
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    torch::Tensor x = wte(tokens);
    if (!checkpointed) return head(block->body(x));
    x = acc::activation_checkpoint(
        *block, [b = block.ptr()](const torch::Tensor& h) { return b->body(h); }, x);
    return acc::activation_checkpoint(
        *head, [h = head.ptr()](const torch::Tensor& x) { return h->forward(x); }, x);
  }
  bool checkpointed;
  torch::nn::Embedding wte{nullptr};
  MlpBlock block{nullptr};
  TiedHead head{nullptr};
};
TORCH_MODULE(TiedLm);

struct Trained {
  std::vector<double> losses;
  std::vector<torch::Tensor> parameters;
  int calls = 0;
};

Trained train_ddp(bool checkpointed) {
  acc::AcceleratorOptions options;
  options.fsdp_plugin = acc::FullyShardedDataParallelPlugin{.sharding_strategy = "NO_SHARD"};
  acc::Accelerator accelerator(options);
  TiedLm net(checkpointed);
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(0.05));
  auto [model, optimizer] = accelerator.prepare(net.ptr(), adamw);
  Trained run;
  for (int step = 0; step < 3; ++step) {
    torch::manual_seed(300 + step);
    const torch::Tensor tokens = torch::randint(kVocab, {4 * world_size()}).narrow(0, 4 * world_rank(), 4);
    const torch::Tensor targets = torch::randint(kVocab, {4 * world_size()}).narrow(0, 4 * world_rank(), 4);
    torch::manual_seed(400 + step + 10 * world_rank());  // each rank's dropout masks
    optimizer->zero_grad();
    const torch::Tensor loss = torch::nn::functional::cross_entropy(model(tokens), targets);
    accelerator.backward(loss);
    run.losses.push_back(accelerator.reduce(loss.detach(), "mean").item<double>());
    optimizer->step();
  }
  EXPECT_TRUE(net->head->weight.is_same(net->wte->weight));
  for (const auto& p : net->parameters()) run.parameters.push_back(p.detach().clone());
  run.calls = net->block->calls;
  return run;
}

class ActivationCheckpointDdp : public acc::testing::DefaultDeviceTest {};

TEST_F(ActivationCheckpointDdp, ATiedModelTrainsAsWithoutCheckpointing) {
  const Trained expected = train_ddp(false);
  const Trained actual = train_ddp(true);
  EXPECT_EQ(expected.calls, 3);
  EXPECT_EQ(actual.calls, 6);
  ASSERT_EQ(actual.losses.size(), expected.losses.size());
  for (std::size_t s = 0; s < expected.losses.size(); ++s) {
    EXPECT_NEAR(actual.losses[s], expected.losses[s], 1e-6) << "step " << s;
  }
  ASSERT_EQ(actual.parameters.size(), expected.parameters.size());
  for (std::size_t p = 0; p < expected.parameters.size(); ++p) {
    EXPECT_TRUE(torch::allclose(actual.parameters[p], expected.parameters[p], 1e-5, 1e-6))
        << "parameter " << p << " differs by "
        << (actual.parameters[p] - expected.parameters[p]).abs().max().item<double>();
  }
}

// --- FULL_SHARD ------------------------------------------------------------

// A unit that checkpoints its body through its scope.
struct ShardedBlockImpl : torch::nn::Module {
  ShardedBlockImpl() : mlp(register_module("mlp", MlpBlock())) {}
  torch::Tensor forward(const torch::Tensor& x) {
    acc::ShardedUnitScope unit(*this);
    const torch::Tensor y = unit.checkpoint([m = mlp.ptr()](const torch::Tensor& h) { return m->body(h); }, x);
    return unit.output(y);
  }
  MlpBlock mlp;
};
TORCH_MODULE(ShardedBlock);

struct BlockStackImpl : torch::nn::Module {
  BlockStackImpl() {
    torch::manual_seed(12);
    in = register_module("in", torch::nn::Linear(3, kDim));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int b = 0; b < 3; ++b) blocks->push_back(ShardedBlock());
    out = register_module("out", torch::nn::Linear(kDim, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = in(x);
    for (const auto& block : *blocks) h = block->as<ShardedBlock>()->forward(h);
    return out(h);
  }
  [[nodiscard]] int calls() const {
    int total = 0;
    for (const auto& block : *blocks) total += block->as<ShardedBlock>()->mlp->calls;
    return total;
  }
  torch::nn::Linear in{nullptr}, out{nullptr};
  torch::nn::ModuleList blocks{nullptr};
};
TORCH_MODULE(BlockStack);

class ActivationCheckpointFullShard : public ::testing::Test {
 protected:
  acc::State state;
  std::unique_ptr<acc::ProcessGroup> group = acc::testing::world_group(state);

  // Three Adam steps of `net`'s forward, sharded by block; the losses and the whole model after.
  template <class Net>
  std::pair<std::vector<double>, torch::OrderedDict<std::string, torch::Tensor>> train(
      Net& net, bool checkpointed, const std::function<torch::Tensor(int)>& loss_of) {
    acc::FullyShardedModel model(net.ptr(), *group,
                                 {.units = acc::UnitPolicy::by_class({"ShardedBlock", "Block"}),
                                  .activation_checkpointing = checkpointed});
    torch::optim::Adam adam(model.parameters(), torch::optim::AdamOptions(1e-2));
    std::vector<double> losses;
    for (int step = 0; step < 3; ++step) {
      adam.zero_grad();
      model.begin_forward();
      torch::Tensor loss;
      try {
        loss = loss_of(step);
      } catch (...) {
        model.abort_forward();
        throw;
      }
      model.end_forward();
      loss.backward();
      EXPECT_EQ(model.whole_parameter_bytes(), 0) << "step " << step;
      EXPECT_EQ(model.whole_gradient_bytes(), 0) << "step " << step;
      adam.step();
      losses.push_back(loss.item<double>());
    }
    return {losses, model.full_state_dict()};
  }

  static void expect_same(
      const std::pair<std::vector<double>, torch::OrderedDict<std::string, torch::Tensor>>& actual,
      const std::pair<std::vector<double>, torch::OrderedDict<std::string, torch::Tensor>>& expected) {
    ASSERT_EQ(actual.first.size(), expected.first.size());
    for (std::size_t s = 0; s < expected.first.size(); ++s) {
      EXPECT_NEAR(actual.first[s], expected.first[s], 1e-6) << "the loss of step " << s;
    }
    for (const auto& item : expected.second) {
      const torch::Tensor* found = actual.second.find(item.key());
      ASSERT_NE(found, nullptr) << item.key();
      EXPECT_TRUE(torch::allclose(*found, item.value(), 1e-5, 1e-6))
          << item.key() << " differs by " << (*found - item.value()).abs().max().item<double>();
    }
  }
};

TEST_F(ActivationCheckpointFullShard, UnitsRecomputeTheirBodyInTheirBackward) {
  const auto loss_of = [this](BlockStack& net) {
    return [this, &net](int step) {
      torch::manual_seed(700 + step);
      const torch::Tensor x = torch::randn({2 * group->size(), 3}).narrow(0, 2 * group->rank(), 2);
      torch::manual_seed(800 + step + 10 * group->rank());
      return net->forward(x).square().mean();
    };
  };
  BlockStack plain;
  const auto expected = train(plain, false, loss_of(plain));
  EXPECT_EQ(plain->calls(), 9);
  BlockStack checkpointed;
  const auto actual = train(checkpointed, true, loss_of(checkpointed));
  EXPECT_EQ(checkpointed->calls(), 18);
  expect_same(actual, expected);
}

TEST_F(ActivationCheckpointFullShard, DistributedModelPassesTheOptionOn) {
  // What the Accelerator builds for FULL_SHARD: a DistributedModel sharding its module.
  const auto run = [this](bool checkpointed) {
    BlockStack net;
    acc::DistributedModelOptions options;
    options.shard_parameters = true;
    options.unit_policy = acc::UnitPolicy::by_class({"ShardedBlock"});
    options.activation_checkpointing = checkpointed;
    acc::DistributedModel model(net.ptr(), *group, {}, options);
    torch::optim::Adam adam(model.fully_sharded()->parameters(), torch::optim::AdamOptions(1e-2));
    std::vector<double> losses;
    for (int step = 0; step < 2; ++step) {
      torch::manual_seed(900 + step);
      const torch::Tensor x = torch::randn({2 * group->size(), 3}).narrow(0, 2 * group->rank(), 2);
      torch::manual_seed(950 + step + 10 * group->rank());
      adam.zero_grad();
      const torch::Tensor loss = model.forward<BlockStackImpl>(x).square().mean();
      loss.backward();
      adam.step();
      losses.push_back(loss.item<double>());
    }
    EXPECT_EQ(net->calls(), checkpointed ? 12 : 6);
    return losses;
  };
  const std::vector<double> expected = run(false);
  const std::vector<double> actual = run(true);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t s = 0; s < expected.size(); ++s) EXPECT_NEAR(actual[s], expected[s], 1e-6) << "step " << s;
}

TEST_F(ActivationCheckpointFullShard, TheGptOfTheJobTrainsAsWithout) {
  const gpt::GptConfig config{.vocab = 23, .sequence = 6, .d_model = 16, .heads = 2, .layers = 2};
  torch::manual_seed(4);
  const torch::Tensor tokens = torch::randint(config.vocab, {2 * group->size(), config.sequence});
  const torch::Tensor targets = torch::randint(config.vocab, {2 * group->size(), config.sequence});
  const auto loss_of = [&](gpt::Gpt& net) {
    return [&](int /*step*/) {
      const torch::Tensor logits = net->forward(tokens.narrow(0, 2 * group->rank(), 2));
      return torch::cross_entropy_loss(logits.reshape({-1, config.vocab}),
                                       targets.narrow(0, 2 * group->rank(), 2).reshape({-1}));
    };
  };
  torch::manual_seed(3);
  gpt::Gpt plain(config);
  const auto expected = train(plain, false, loss_of(plain));
  torch::manual_seed(3);
  gpt::Gpt checkpointed(config);
  expect_same(train(checkpointed, true, loss_of(checkpointed)), expected);
}

// A checkpointing unit (with parameters of its own) that holds another unit.
struct HolderImpl : torch::nn::Module {
  HolderImpl()
      : inner(register_module("inner", ShardedBlock())), own(register_module("own", torch::nn::Linear(kDim, kDim))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    acc::ShardedUnitScope unit(*this);
    return unit.output(
        unit.checkpoint([i = inner.ptr(), o = own.ptr()](const torch::Tensor& h) { return o->forward(i->forward(h)); },
                        x));
  }
  ShardedBlock inner;
  torch::nn::Linear own;
};
TORCH_MODULE(Holder);

struct HolderNetImpl : torch::nn::Module {
  HolderNetImpl() : holder(register_module("holder", Holder())) {}
  torch::Tensor forward(const torch::Tensor& x) { return holder(x); }
  Holder holder;
};
TORCH_MODULE(HolderNet);

TEST_F(ActivationCheckpointFullShard, AUnitHoldingAUnitIsRefused) {
  HolderNet net;
  acc::FullyShardedModel model(net.ptr(), *group,
                               {.units = acc::UnitPolicy::by_class({"Holder", "ShardedBlock"}),
                                .activation_checkpointing = true});
  model.begin_forward();
  const std::string message = acc::testing::error_of([&] { (void)net->forward(torch::randn({2, kDim})); });
  model.abort_forward();
  EXPECT_NE(message.find("may hold no unit"), std::string::npos) << message;
}

struct PluginRun {
  std::vector<double> losses;
  int calls = 0;
};

PluginRun train_through_plugin(bool checkpointed) {
  acc::AcceleratorOptions options;
  options.fsdp_plugin = acc::FullyShardedDataParallelPlugin{.sharding_strategy = "FULL_SHARD"};
  options.fsdp_plugin->auto_wrap_policy = "transformer_based_wrap";
  options.fsdp_plugin->transformer_cls_names_to_wrap = {"ShardedBlock"};
  options.fsdp_plugin->activation_checkpointing = checkpointed;
  acc::Accelerator accelerator(options);
  BlockStack net;
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-2));
  auto [model, optimizer] = accelerator.prepare(net.ptr(), adam);
  PluginRun run;
  for (int step = 0; step < 3; ++step) {
    torch::manual_seed(700 + step);
    const torch::Tensor x = torch::randn({2 * world_size(), 3}).narrow(0, 2 * world_rank(), 2);
    torch::manual_seed(800 + step + 10 * world_rank());
    optimizer->zero_grad();
    const torch::Tensor loss = model(x).square().mean();
    accelerator.backward(loss);
    optimizer->step();
    run.losses.push_back(accelerator.reduce(loss.detach(), "mean").item<double>());
  }
  run.calls = net->calls();
  return run;
}

class ActivationCheckpointThroughPlugin : public acc::testing::DefaultDeviceTest {};

TEST_F(ActivationCheckpointThroughPlugin, FullShardUnitsRecomputeAndTrainAsWithout) {
  const PluginRun expected = train_through_plugin(false);
  const PluginRun actual = train_through_plugin(true);
  EXPECT_EQ(expected.calls, 9);
  EXPECT_EQ(actual.calls, 18);
  ASSERT_EQ(actual.losses.size(), expected.losses.size());
  for (std::size_t s = 0; s < expected.losses.size(); ++s) {
    EXPECT_NEAR(actual.losses[s], expected.losses[s], 1e-6) << "step " << s;
  }
}

TEST(ActivationCheckpointPlugin, AcceptedWithFullShardRefusedWhereNoUnitIsLive) {
  acc::FullyShardedDataParallelPlugin plugin{.sharding_strategy = "FULL_SHARD"};
  plugin.activation_checkpointing = true;
  acc::check_plugin(plugin);
  plugin.sharding_strategy = "HYBRID_SHARD";
  acc::check_plugin(plugin);
  for (const std::string strategy : {"SHARD_GRAD_OP", "NO_SHARD"}) {
    plugin.sharding_strategy = strategy;
    const std::string message = acc::testing::error_of([&] { acc::check_plugin(plugin); });
    EXPECT_NE(message.find("activation_checkpointing = true"), std::string::npos) << message;
    EXPECT_NE(message.find("accelerate::activation_checkpoint("), std::string::npos) << message;
  }
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
