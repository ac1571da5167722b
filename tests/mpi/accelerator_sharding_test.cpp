// Sharded training through the Accelerator (fsdp_plugin, SHARD_GRAD_OP = ZeRO
// stage 2) at 1, 2 and 4 ranks: it ends where NO_SHARD (DDP) ends, with
// gradient accumulation; each rank's optimizer holds a shard; a run resumed
// from save_state ends bit-identical to the uninterrupted one, and resumes
// without sharding; clipping by norm and by value sees the whole averaged
// gradient; HYBRID_SHARD_ZERO2 on emulated nodes shards within each node
// and ends where NO_SHARD ends too, its checkpoints (one file, or one per
// node) resuming under every sharding; an unknown strategy is refused with
// the names there are. fp16 with sharding is in accelerator_fp16_test.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/error.hpp"
#include "accelerate/runtime/availability.hpp"
#include "accelerate/training/accelerator.hpp"
#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"
#include "common/ends_where.hpp"
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

class AcceleratorSharding : public acc::testing::DefaultDeviceTest {};

struct Net : torch::nn::Module {
  Net() {
    torch::manual_seed(21);
    fc1 = register_module("fc1", torch::nn::Linear(9, 17));
    fc2 = register_module("fc2", torch::nn::Linear(17, 2));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::tanh(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

constexpr int kMicroSteps = 8;  // 4 optimizer steps with 2 micro-steps each

// This rank's micro-batch `i` of fixed global data.
std::pair<torch::Tensor, torch::Tensor> batch(int i) {
  torch::manual_seed(1000 + i);
  const auto x = torch::randn({4 * world_size(), 9});
  const auto y = torch::randn({4 * world_size(), 2});
  return {x.narrow(0, 4 * world_rank(), 4), y.narrow(0, 4 * world_rank(), 4)};
}

// HYBRID_SHARD_ZERO2's emulated nodes: 2 nodes of 2 ranks at 4 ranks, 2 of 1
// at 2 (shards of a whole bucket, replicated), one node at 1 rank.
int ranks_per_node() { return std::max(1, world_size() / 2); }

struct Layout {
  int ranks_per_node = 0;  // 0: the host is the node
  bool save_on_each_node = false;
};

acc::AcceleratorOptions options(const std::string& strategy, Layout layout = {}) {
  acc::AcceleratorOptions o;
  o.project_config.save_on_each_node = layout.save_on_each_node;
  o.gradient_accumulation_steps = 2;
  o.fsdp_plugin = acc::FullyShardedDataParallelPlugin{.sharding_strategy = strategy};
  o.ddp_kwargs.bucket_cap_mb = 200.0 / (1024 * 1024);  // 50 floats: several buckets
  return o;
}

struct TrainingRun {
  std::vector<torch::Tensor> parameters;
  std::vector<double> norms;  // clip_grad_norm_'s results
  std::int64_t shard_elements = 0;
  std::int64_t state_elements = 0;
  std::int64_t reduced_in_backward = 0;  // buckets
};

enum class Clip { None, Norm, Value };

// Micro-steps [from, to): first loads `resume_from`, at the end saves to
// `save_to`, clips before every step as `clip` says.
TrainingRun train(const std::string& strategy, int from, int to, const std::optional<fs::path>& save_to = std::nullopt,
                  const std::optional<fs::path>& resume_from = std::nullopt, Clip clip = Clip::None,
                  Layout layout = {}) {
  // Emulated nodes come with the State (or the environment).
  acc::StateOptions nodes;
  nodes.emulated_ranks_per_node = layout.ranks_per_node;
  acc::Accelerator accelerator = layout.ranks_per_node > 0
                                     ? acc::Accelerator(std::make_shared<acc::State>(nodes), options(strategy, layout))
                                     : acc::Accelerator(options(strategy, layout));
  auto net = std::make_shared<Net>();
  // Adam, or (to see clipping, which Adam's scale invariance hides) SGD.
  std::unique_ptr<torch::optim::Optimizer> chosen;
  if (clip == Clip::None) {
    chosen = std::make_unique<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(0.01));
  } else {
    chosen = std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  }
  torch::optim::Optimizer& adam = *chosen;
  auto [model, optimizer] = accelerator.prepare(net, adam);
  if (resume_from) accelerator.load_state(*resume_from);
  TrainingRun run;
  for (int i = from; i < to; ++i) {
    auto scope = accelerator.accumulate(*model);
    const auto [x, y] = batch(i);
    accelerator.backward(torch::mse_loss(model->forward<Net>(x), y));
    // Bounds below the gradients' size, so that clipping changes the run.
    if (clip == Clip::Norm) {
      if (const auto norm = accelerator.clip_grad_norm_(net->parameters(), 0.05)) run.norms.push_back(*norm);
    } else if (clip == Clip::Value) {
      accelerator.clip_grad_value_(net->parameters(), 0.002);
    }
    optimizer->step();
    optimizer->zero_grad();
  }
  if (save_to) accelerator.save_state(*save_to);
  for (const auto& p : net->parameters()) run.parameters.push_back(p.detach().clone());
  if (optimizer->sharded() != nullptr) {
    run.shard_elements = optimizer->sharded()->shard_elements();
    run.reduced_in_backward = optimizer->sharded()->buckets_reduced_in_backward();
  }
  for (const auto& [key, state] : adam.state()) {
    if (clip != Clip::None) break;
    const auto& s = static_cast<const torch::optim::AdamParamState&>(*state);
    run.state_elements += s.exp_avg().numel() + s.exp_avg_sq().numel();
  }
  return run;
}

// `run` ends where `reference` ends, within rounding, with the same
// parameters on every rank.
void expect_ends_where(const TrainingRun& run, const TrainingRun& reference) {
  acc::testing::expect_ends_where(run.parameters, reference.parameters);
}

TEST_F(AcceleratorSharding, ShardGradOpEndsWhereNoShardEndsWithAShardOfTheState) {
  const TrainingRun ddp = train("NO_SHARD", 0, kMicroSteps);
  const TrainingRun sharded = train("SHARD_GRAD_OP", 0, kMicroSteps);
  expect_ends_where(sharded, ddp);
  // 9*17+17 + 17*2+2 = 206 parameters; Adam's two moments of the shard only.
  EXPECT_EQ(ddp.shard_elements, 0);
  EXPECT_EQ(ddp.state_elements, 2 * 206);
  EXPECT_GE(sharded.shard_elements, 206 / world_size());
  EXPECT_LE(sharded.shard_elements, 206 / world_size() + 5);  // one padding element per bucket at most
  EXPECT_EQ(sharded.state_elements, 2 * sharded.shard_elements);
  // 206 elements in buckets of 50: each of the 4 synchronising backward
  // passes reduced all 5 in backward; the accumulating ones none (they would
  // have been refused as a second gradient).
  EXPECT_EQ(sharded.reduced_in_backward, 4 * 5);
}

TEST_F(AcceleratorSharding, AResumedShardedRunEndsBitIdenticalAndResumesUnshardedToo) {
  const fs::path dir = acc::testing::shared_temp_directory("accelerator_sharding_resume");
  const TrainingRun uninterrupted = train("SHARD_GRAD_OP", 0, kMicroSteps);
  (void)train("SHARD_GRAD_OP", 0, kMicroSteps / 2, dir / "ckpt");
  const TrainingRun resumed = train("SHARD_GRAD_OP", kMicroSteps / 2, kMicroSteps, std::nullopt, dir / "ckpt");
  for (std::size_t i = 0; i < uninterrupted.parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed.parameters[i], uninterrupted.parameters[i])) << "parameter " << i;
  }
  // The sharded state was saved whole: it resumes without sharding too.
  const TrainingRun unsharded = train("NO_SHARD", kMicroSteps / 2, kMicroSteps, std::nullopt, dir / "ckpt");
  for (std::size_t i = 0; i < uninterrupted.parameters.size(); ++i) {
    EXPECT_TRUE(torch::allclose(unsharded.parameters[i], uninterrupted.parameters[i], 1e-5, 1e-6)) << "parameter " << i;
  }
  acc::testing::remove_shared_directory(dir);
}

TEST_F(AcceleratorSharding, HybridShardZero2ShardsWithinEachNodeAndEndsWhereNoShardEnds) {
  const Layout nodes{.ranks_per_node = ranks_per_node()};
  const TrainingRun ddp = train("NO_SHARD", 0, kMicroSteps);
  const TrainingRun hybrid = train("HYBRID_SHARD_ZERO2", 0, kMicroSteps, std::nullopt, std::nullopt, Clip::None, nodes);
  expect_ends_where(hybrid, ddp);
  // A shard of the node's ranks, not of the world's: 206 elements over the
  // node's ranks, in 5 buckets, all reduced in the 4 synchronising backwards.
  const int local = nodes.ranks_per_node;
  EXPECT_GE(hybrid.shard_elements, 206 / local);
  EXPECT_LE(hybrid.shard_elements, 206 / local + 5);
  EXPECT_EQ(hybrid.state_elements, 2 * hybrid.shard_elements);
  EXPECT_EQ(hybrid.reduced_in_backward, 4 * 5);
}

TEST_F(AcceleratorSharding, AHybridCheckpointResumesUnderEveryShardingInOneFileOrOnePerNode) {
  const fs::path dir = acc::testing::shared_temp_directory("accelerator_sharding_hybrid");
  const Layout nodes{.ranks_per_node = ranks_per_node()};
  const TrainingRun uninterrupted =
      train("HYBRID_SHARD_ZERO2", 0, kMicroSteps, std::nullopt, std::nullopt, Clip::None, nodes);
  // One file: the first node's ranks write the shards, every copy reads them.
  (void)train("HYBRID_SHARD_ZERO2", 0, kMicroSteps / 2, dir / "one", std::nullopt, Clip::None, nodes);
  const TrainingRun resumed =
      train("HYBRID_SHARD_ZERO2", kMicroSteps / 2, kMicroSteps, std::nullopt, dir / "one", Clip::None, nodes);
  for (std::size_t i = 0; i < uninterrupted.parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed.parameters[i], uninterrupted.parameters[i])) << "parameter " << i;
  }
  for (const std::string strategy : {"SHARD_GRAD_OP", "NO_SHARD"}) {
    const TrainingRun other = train(strategy, kMicroSteps / 2, kMicroSteps, std::nullopt, dir / "one");
    for (std::size_t i = 0; i < uninterrupted.parameters.size(); ++i) {
      EXPECT_TRUE(torch::allclose(other.parameters[i], uninterrupted.parameters[i], 1e-5, 1e-6))
          << strategy << ", parameter " << i;
    }
  }
  // A file per node, each with the whole state from that node's shards.
  const Layout per_node{.ranks_per_node = nodes.ranks_per_node, .save_on_each_node = true};
  (void)train("HYBRID_SHARD_ZERO2", 0, kMicroSteps / 2, dir / "per_node", std::nullopt, Clip::None, per_node);
  const TrainingRun from_node =
      train("HYBRID_SHARD_ZERO2", kMicroSteps / 2, kMicroSteps, std::nullopt, dir / "per_node", Clip::None, per_node);
  for (std::size_t i = 0; i < uninterrupted.parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(from_node.parameters[i], uninterrupted.parameters[i])) << "parameter " << i;
  }
  const TrainingRun unsharded_from_node =
      train("NO_SHARD", kMicroSteps / 2, kMicroSteps, std::nullopt, dir / "per_node", Clip::None, per_node);
  expect_ends_where(unsharded_from_node, uninterrupted);
  acc::testing::remove_shared_directory(dir);
}

TEST_F(AcceleratorSharding, ShardsOverTheWorldCannotBeSavedOnePerNode) {
  if (world_size() < 2) GTEST_SKIP() << "needs two emulated nodes (2 or more ranks)";
  const fs::path dir = acc::testing::shared_temp_directory("accelerator_sharding_per_node");
  const Layout per_node{.ranks_per_node = ranks_per_node(), .save_on_each_node = true};
  const std::string message = acc::testing::error_of<acc::ConfigError>(
      [&] { (void)train("SHARD_GRAD_OP", 0, kMicroSteps / 2, dir / "ckpt", std::nullopt, Clip::None, per_node); });
  EXPECT_NE(message.find("HYBRID_SHARD_ZERO2"), std::string::npos) << message;
  acc::testing::remove_shared_directory(dir);
}

TEST_F(AcceleratorSharding, AnUnknownStrategyIsRefusedWithTheNames) {
  auto message = acc::testing::error_of<acc::ConfigError>([] { acc::Accelerator a(options("ZERO_SHARD")); });
  EXPECT_NE(message.find("not one of"), std::string::npos) << message;
}

TEST_F(AcceleratorSharding, ClippingUsesTheWholeAveragedGradient) {
  for (const Clip clip : {Clip::Norm, Clip::Value}) {
    SCOPED_TRACE(clip == Clip::Norm ? "clip_grad_norm_" : "clip_grad_value_");
    const TrainingRun ddp = train("NO_SHARD", 0, kMicroSteps, std::nullopt, std::nullopt, clip);
    const TrainingRun sharded = train("SHARD_GRAD_OP", 0, kMicroSteps, std::nullopt, std::nullopt, clip);
    for (std::size_t i = 0; i < ddp.parameters.size(); ++i) {
      EXPECT_TRUE(torch::allclose(sharded.parameters[i], ddp.parameters[i], 1e-5, 1e-6)) << "parameter " << i;
    }
    ASSERT_EQ(sharded.norms.size(), ddp.norms.size());
    if (clip == Clip::Norm) {
      // Every norm above the bound: clipping changed every step.
      ASSERT_EQ(ddp.norms.size(), static_cast<std::size_t>(kMicroSteps / 2));
      for (const double norm : ddp.norms) EXPECT_GT(norm, 0.05);
    }
    for (std::size_t k = 0; k < ddp.norms.size(); ++k) EXPECT_NEAR(sharded.norms[k], ddp.norms[k], 1e-5 * ddp.norms[k]);
  }
}

TEST(FullyShardedDataParallelPlugin, StrategiesByNameAndNumber) {
  using acc::FullyShardedDataParallelPlugin;
  EXPECT_EQ(acc::zero_stage_of({.sharding_strategy = "SHARD_GRAD_OP"}), acc::ZeroStage::Gradients);
  EXPECT_EQ(acc::zero_stage_of({.sharding_strategy = " shard_grad_op "}), acc::ZeroStage::Gradients);
  EXPECT_EQ(acc::zero_stage_of({.sharding_strategy = "2"}), acc::ZeroStage::Gradients);
  EXPECT_FALSE(acc::zero_stage_of({.sharding_strategy = "NO_SHARD"}).has_value());
  EXPECT_FALSE(acc::zero_stage_of({.sharding_strategy = "3"}).has_value());
  EXPECT_EQ(acc::zero_stage_of({}), acc::ZeroStage::Parameters);  // FULL_SHARD, the seeds' default
  EXPECT_EQ(acc::zero_stage_of({.sharding_strategy = "1"}), acc::ZeroStage::Parameters);
  for (const std::string name : {"HYBRID_SHARD", "hybrid_shard", "4"}) {
    EXPECT_EQ(acc::zero_stage_of({.sharding_strategy = name}), acc::ZeroStage::Parameters) << name;
    EXPECT_TRUE(acc::shards_within_node({.sharding_strategy = name})) << name;
  }
  EXPECT_FALSE(acc::shards_within_node({.sharding_strategy = "FULL_SHARD"}));
  for (const std::string name : {"HYBRID_SHARD_ZERO2", "hybrid_shard_zero2", "5"}) {
    EXPECT_EQ(acc::zero_stage_of({.sharding_strategy = name}), acc::ZeroStage::Gradients) << name;
    EXPECT_TRUE(acc::shards_within_node({.sharding_strategy = name})) << name;
  }
  EXPECT_FALSE(acc::shards_within_node({.sharding_strategy = "SHARD_GRAD_OP"}));
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
