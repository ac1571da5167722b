// Two tiers of checkpoint storage at 1, 2 and 4 ranks (emulated nodes of two
// ranks): every save lands in the node-local tier, one file per node, and is
// copied to the shared tier; load_state takes the newest complete checkpoint
// of either, the local copy when both hold it, and a job whose nodes hold no
// local copy (requeued elsewhere) resumes from the shared one. Synchronous
// and asynchronous saves alike; rotation in both tiers.
// Runs with ACCELERATE_MPI_THREAD_LEVEL=multiple (tests/mpi/training.cmake).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/checkpoint/checkpoint_directory.hpp"
#include "accelerate/error.hpp"
#include "accelerate/training/accelerator.hpp"
#include "common/gpu_skip.hpp"
#include "common/test_helpers.hpp"

namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
namespace fs = std::filesystem;
using acc::testing::world_rank;
using acc::testing::world_size;

class TwoTiers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (acc::testing::ranks_share_a_gpu()) GTEST_SKIP() << acc::testing::kRanksShareAGpu;
    shared = acc::testing::shared_temp_directory("tiers_shared");
    local = acc::testing::shared_temp_directory("tiers_local");
    acc::StateOptions nodes;
    nodes.emulated_ranks_per_node = world_size() >= 2 ? 2 : 1;
    nodes.thread_level = acc::ThreadLevel::Multiple;
    state = std::make_shared<acc::State>(nodes);
  }
  void TearDown() override {
    acc::testing::remove_shared_directory(shared);
    acc::testing::remove_shared_directory(local);
  }
  acc::AcceleratorOptions options(std::optional<int> total_limit = std::nullopt) const {
    acc::AcceleratorOptions o;
    o.project_config.project_dir = shared.string();
    o.project_config.local_dir = local.string();
    o.project_config.automatic_checkpoint_naming = true;
    o.project_config.total_limit = total_limit;
    return o;
  }
  // What every node's file of checkpoint `name` in `tier` should be.
  void expect_complete(const fs::path& tier, const std::string& name) const {
    const fs::path directory = tier / "checkpoints" / name;
    EXPECT_TRUE(acc::checkpoint::read_complete_manifest(directory).has_value()) << directory;
    for (int node = 0; node < state->num_nodes(); ++node) {
      EXPECT_TRUE(fs::exists(directory / ("state.node" + std::to_string(node) + ".h5"))) << directory;
    }
  }

  fs::path shared, local;
  std::shared_ptr<acc::State> state;
};

struct Net : torch::nn::Module {
  Net() {
    torch::manual_seed(4);
    fc = register_module("fc", torch::nn::Linear(5, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};

struct Training {
  Training(const std::shared_ptr<acc::State>& state, const acc::AcceleratorOptions& options)
      : accelerator(state, options), net(std::make_shared<Net>()), sgd(net->parameters(), 0.1) {
    auto [m, o] = accelerator.prepare(net, sgd);
    model = m;
    optimizer = o;
  }
  void train(int steps) {
    torch::manual_seed(30 + world_rank());
    for (int s = 0; s < steps; ++s) {
      const auto x = torch::randn({4, 5});
      accelerator.backward(torch::mse_loss(model->forward<Net>(x), x.narrow(1, 0, 3).sin()));
      optimizer->step();
      optimizer->zero_grad();
    }
  }
  torch::Tensor weight() const { return net->fc->weight.detach().clone(); }

  acc::Accelerator accelerator;
  std::shared_ptr<Net> net;
  torch::optim::SGD sgd;
  std::shared_ptr<acc::DistributedModel> model;
  std::shared_ptr<acc::AcceleratedOptimizer> optimizer;
};

TEST_F(TwoTiers, ASaveLandsInBothTiersAndLoadPrefersTheLocalCopy) {
  torch::Tensor saved;
  {
    Training run(state, options());
    run.train(2);
    saved = run.weight();
    EXPECT_EQ(run.accelerator.save_state(), shared / "checkpoints" / "checkpoint_0");
  }
  expect_complete(local, "checkpoint_0");
  expect_complete(shared, "checkpoint_0");
  Training resumed(state, options());
  const auto loaded = resumed.accelerator.load_state();
  EXPECT_EQ(loaded.directory, local / "checkpoints" / "checkpoint_0");
  EXPECT_TRUE(torch::equal(resumed.weight(), saved));
}

TEST_F(TwoTiers, NodesWithoutTheLocalCopyResumeFromTheSharedTier) {
  torch::Tensor saved;
  {
    Training run(state, options());
    run.train(3);
    saved = run.weight();
    (void)run.accelerator.save_state();
  }
  // A requeued job on other nodes: their local disks are empty.
  if (world_rank() == 0) fs::remove_all(local / "checkpoints");
  state->wait_for_everyone("the local tier removed");
  Training resumed(state, options());
  const auto loaded = resumed.accelerator.load_state();
  EXPECT_EQ(loaded.directory, shared / "checkpoints" / "checkpoint_0");
  EXPECT_TRUE(torch::equal(resumed.weight(), saved));
}

TEST_F(TwoTiers, TheNewestCompleteCheckpointOfEitherTierIsLoaded) {
  torch::Tensor second;
  {
    Training run(state, options());
    run.train(1);
    (void)run.accelerator.save_state();
    run.train(1);
    second = run.weight();
    (void)run.accelerator.save_state();
  }
  // The shared copy of checkpoint_1 never completed: the local one is newer.
  if (world_rank() == 0) fs::remove(shared / "checkpoints" / "checkpoint_1" / "manifest.json");
  state->wait_for_everyone("a shared copy made incomplete");
  Training resumed(state, options());
  EXPECT_EQ(resumed.accelerator.load_state().directory, local / "checkpoints" / "checkpoint_1");
  EXPECT_TRUE(torch::equal(resumed.weight(), second));
}

TEST_F(TwoTiers, AsynchronousSavesDrainInTheBackgroundAndRotateBothTiers) {
  Training run(state, options(/*total_limit=*/1));
  for (int i = 0; i < 2; ++i) {
    run.train(1);
    EXPECT_EQ(run.accelerator.save_state(std::nullopt, {.async_save = true}),
              shared / "checkpoints" / ("checkpoint_" + std::to_string(i)));
  }
  EXPECT_EQ(run.accelerator.wait_for_save(), shared / "checkpoints" / "checkpoint_1");
  expect_complete(local, "checkpoint_1");
  expect_complete(shared, "checkpoint_1");
  EXPECT_FALSE(fs::exists(local / "checkpoints" / "checkpoint_0"));
  EXPECT_FALSE(fs::exists(shared / "checkpoints" / "checkpoint_0"));
}

TEST_F(TwoTiers, ALocalTierNeedsAutomaticNaming) {
  acc::AcceleratorOptions o = options();
  o.project_config.automatic_checkpoint_naming = false;
  const std::string message = acc::testing::error_of<acc::ConfigError>([&] { acc::Accelerator refused(state, o); });
  EXPECT_NE(message.find("automatic_checkpoint_naming"), std::string::npos) << message;
}

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
