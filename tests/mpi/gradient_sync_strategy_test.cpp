// GradientSyncStrategy at 1 and 2 ranks: one implementation per
// sharding_strategy of the plugin (by name or number, and DDP without a
// plugin), each building the prepared model and agreeing on an fp16
// overflow as its strategy needs. Training under each strategy is tested
// end to end in accelerator_sharding_test, accelerator_full_shard_test and
// tied_weights_test.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/training/distributed_data_parallel_kwargs.hpp"
#include "accelerate/training/distributed_model.hpp"
#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"
#include "training/gradient_sync_strategy.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
using acc::training_detail::make_gradient_sync_strategy;

struct BlockImpl : torch::nn::Module {};
struct OtherImpl : torch::nn::Module {};

struct Expected {
  std::string name;
  bool reduce_gradients;     // the model all-reduces in backward (DDP, ZeRO-1)
  bool shard_parameters;     // the model is a FullyShardedModel (ZeRO-3)
  bool overflow_over_world;  // each rank unscales a shard: the world agrees on an overflow
  bool model_replicas;       // HYBRID_SHARD: the model's shards have replicas on the other nodes
};

TEST(GradientSyncStrategy, OneImplementationPerShardingStrategy) {
  acc::State state;
  const auto world = acc::ProcessGroup::world(state);
  const acc::DistributedDataParallelKwargs ddp_kwargs;
  const auto context = [&] {
    return acc::training_detail::SyncContext{.state = state,
                                             .world = *world,
                                             .group_options = {},
                                             .ddp_kwargs = ddp_kwargs,
                                             .sync_in_backward = [] { return true; }};
  };
  const auto check = [&](acc::training_detail::GradientSyncStrategy& strategy, const Expected& expected) {
    EXPECT_EQ(strategy.name(), expected.name);
    // Each flag starts at the opposite of what is expected: the strategy must set it.
    acc::DistributedModelOptions options;
    options.reduce_gradients = !expected.reduce_gradients;
    options.shard_parameters = !expected.shard_parameters;
    strategy.configure_model(options);
    EXPECT_EQ(options.reduce_gradients, expected.reduce_gradients);
    EXPECT_EQ(options.shard_parameters, expected.shard_parameters);
    EXPECT_EQ(strategy.overflow_group(), expected.overflow_over_world ? world.get() : nullptr);
    EXPECT_EQ(options.shard_replicas != nullptr, expected.model_replicas);
  };

  {
    SCOPED_TRACE("no plugin");
    check(*make_gradient_sync_strategy(nullptr, context()), {"NO_SHARD", true, false, false, false});
  }
  const std::vector<std::pair<std::string, Expected>> cases = {
      {"NO_SHARD", {"NO_SHARD", true, false, false, false}},
      {"3", {"NO_SHARD", true, false, false, false}},
      {"SHARD_GRAD_OP", {"SHARD_GRAD_OP", false, false, true, false}},
      {"2", {"SHARD_GRAD_OP", false, false, true, false}},
      {"HYBRID_SHARD_ZERO2", {"HYBRID_SHARD_ZERO2", false, false, true, false}},
      {"FULL_SHARD", {"FULL_SHARD", false, true, true, false}},
      {"1", {"FULL_SHARD", false, true, true, false}},
      {"HYBRID_SHARD", {"HYBRID_SHARD", false, true, true, true}},
  };
  for (const auto& [given, expected] : cases) {
    SCOPED_TRACE("sharding_strategy " + given);
    const acc::FullyShardedDataParallelPlugin plugin{.sharding_strategy = given};
    check(*make_gradient_sync_strategy(&plugin, context()), expected);
  }
}

TEST(GradientSyncStrategy, FullShardBuildsThePluginsUnits) {
  acc::State state;
  const auto world = acc::ProcessGroup::world(state);
  const acc::DistributedDataParallelKwargs ddp_kwargs;
  acc::FullyShardedDataParallelPlugin plugin{.sharding_strategy = "FULL_SHARD"};
  plugin.auto_wrap_policy = "transformer_based_wrap";
  plugin.transformer_cls_names_to_wrap = {"Block"};
  plugin.activation_checkpointing = true;
  plugin.reshard_after_forward = false;
  const auto strategy = make_gradient_sync_strategy(
      &plugin,
      {.state = state, .world = *world, .group_options = {}, .ddp_kwargs = ddp_kwargs, .sync_in_backward = {}});
  acc::DistributedModelOptions options;
  strategy->configure_model(options);
  EXPECT_TRUE(options.activation_checkpointing);
  EXPECT_FALSE(options.reshard_after_forward);
  EXPECT_EQ(options.shard_group, nullptr);  // the model's own group, the world, shards
  // The units are the plugin's: the module of class Block is one, the other is not.
  torch::nn::Module root;
  root.register_module("block", std::make_shared<BlockImpl>());
  root.register_module("other", std::make_shared<OtherImpl>());
  EXPECT_EQ(options.unit_policy.select(root), std::vector<std::string>{"block"});
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
