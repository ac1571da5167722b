// Checkpoints of sharded optimizer state at 1, 2 and 4 ranks: a ZeRO stage 2
// run saves its Adam state as whole per-parameter tensors (each rank writing
// its pieces), and the file resumes, within rounding of the uninterrupted
// run, with stage 2 under other buckets on every rank, with stage 1 on half
// the ranks, and with no sharding on one rank. Every rank trains on the same
// batch, so the averaged gradient is the same on any number of ranks.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/checkpoint/checkpoint_writer.hpp"
#include "accelerate/comm/process_group.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/training/sharded_optimizer.hpp"
#include "common/odd_sized_net.hpp"
#include "common/test_helpers.hpp"
#include "common/world_group.hpp"
#include "training_state/optimizer_state.hpp"
#include "training_state/state_writer.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
namespace ckpt = accelerate::checkpoint;
namespace fs = std::filesystem;
using acc::testing::world_rank;
using acc::testing::world_size;

using Net = acc::testing::OddSizedNet;

constexpr int kSaveAt = 3;
constexpr int kSteps = 6;
constexpr double kFloats = 4.0 / (1024 * 1024);  // bucket_cap_mb of one float

// Adam over two param groups with their own learning rates.
std::unique_ptr<torch::optim::Adam> make_adam(Net& net) {
  std::vector<torch::Tensor> rest = net.fc2->parameters();
  for (const auto& p : net.fc3->parameters()) rest.push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(net.fc1->parameters(), std::make_unique<torch::optim::AdamOptions>(0.02));
  groups.emplace_back(rest, std::make_unique<torch::optim::AdamOptions>(0.005));
  return std::make_unique<torch::optim::Adam>(groups, torch::optim::AdamOptions(0.01).weight_decay(0.01));
}

// Steps [from, to) on batch i, the same on every rank.
void train(Net& net, acc::ShardedOptimizer* sharded, torch::optim::Optimizer& optimizer, int from, int to) {
  for (int i = from; i < to; ++i) {
    torch::manual_seed(500 + i);
    const auto x = torch::randn({8, 7});
    const auto y = torch::randn({8, 3});
    torch::mse_loss(net.forward(x), y).backward();
    if (sharded != nullptr) {
      sharded->step();
      sharded->zero_grad();
    } else {
      optimizer.step();
      optimizer.zero_grad();
    }
  }
}

std::vector<torch::Tensor> parameters_of(Net& net) {
  std::vector<torch::Tensor> out;
  for (const auto& p : net.parameters()) out.push_back(p.detach().clone());
  return out;
}

class ShardedCheckpoint : public ::testing::Test {
 protected:
  acc::State state;
  std::unique_ptr<acc::ProcessGroup> world = acc::testing::world_group(state);
  fs::path dir = acc::testing::shared_temp_directory("sharded_checkpoint");
  fs::path file = dir / "state.h5";
  std::vector<torch::Tensor> uninterrupted;

  // Stage 2 on every rank, buckets of 17 floats: saved after kSaveAt steps,
  // then run on to kSteps for the reference.
  void SetUp() override {
    Net net(11);
    auto adam = make_adam(net);
    acc::ShardedOptimizer sharded(*adam, *world, {.stage = acc::ZeroStage::Gradients, .bucket_cap_mb = 17 * kFloats});
    train(net, &sharded, *adam, 0, kSaveAt);
    {
      ckpt::CheckpointWriter writer({.comm = MPI_COMM_WORLD, .file = file}, {.step = kSaveAt});
      for (const auto& item : net.named_parameters()) writer.write_replicated("model/" + item.key(), item.value());
      const ckpt::ShardLayout layout = sharded.shard_layout();
      ckpt::detail::FileStateWriter into(writer);
      ckpt::detail::write_optimizer(into, "optimizer", *adam, &layout);
      writer.close();
    }
    train(net, &sharded, *adam, kSaveAt, kSteps);
    uninterrupted = parameters_of(net);
  }
  void TearDown() override { acc::testing::remove_shared_directory(dir); }

  // Resumes from the file on `comm`: a fresh model of other initial values
  // takes the saved weights, `stage` (or no sharding) takes the optimizer state.
  std::vector<torch::Tensor> resume(MPI_Comm comm, acc::ProcessGroup* group, std::optional<acc::ZeroStage> stage,
                                    double bucket_cap_mb) {
    Net net(99);
    ckpt::CheckpointReader reader({.comm = comm, .file = file});
    {
      torch::NoGradGuard no_grad;
      for (auto& item : net.named_parameters()) reader.read_replicated_into("model/" + item.key(), item.value());
    }
    auto adam = make_adam(net);
    std::unique_ptr<acc::ShardedOptimizer> sharded;
    std::optional<ckpt::ShardLayout> layout;
    if (stage) {
      sharded = std::make_unique<acc::ShardedOptimizer>(*adam, *group,
                                                        acc::ShardingOptions{.stage = *stage,
                                                                             .bucket_cap_mb = bucket_cap_mb});
      layout = sharded->shard_layout();
    }
    ckpt::detail::read_optimizer(reader, "optimizer", *adam, layout ? &*layout : nullptr);
    train(net, sharded.get(), *adam, kSaveAt, kSteps);
    return parameters_of(net);
  }

  void expect_close_to_uninterrupted(const std::vector<torch::Tensor>& resumed, const std::string& how) {
    ASSERT_EQ(resumed.size(), uninterrupted.size());
    for (std::size_t i = 0; i < resumed.size(); ++i) {
      EXPECT_TRUE(torch::allclose(resumed[i], uninterrupted[i], 1e-5, 1e-6)) << how << ", parameter " << i;
    }
  }
};

TEST_F(ShardedCheckpoint, TheFileHoldsWholeParameterTensorsWhateverTheSharding) {
  ckpt::CheckpointReader reader({.comm = MPI_COMM_WORLD, .file = file});
  Net net(11);
  const auto parameters = net.parameters();
  // fc1.weight, the first parameter: its moments as whole [13, 7] tensors.
  for (const char* field : {"exp_avg", "exp_avg_sq"}) {
    const auto& entry = reader.entry(std::string("optimizer/state/0/") + field);
    EXPECT_EQ(entry.kind, ckpt::EntryKind::Replicated) << field;
    EXPECT_EQ(entry.spec.shape, (std::vector<std::int64_t>{13, 7})) << field;
  }
  EXPECT_EQ(reader.entries("optimizer/state").size(), 2 * parameters.size());
  EXPECT_FALSE(reader.attribute("optimizer", "sharded_world_size").has_value());
  EXPECT_EQ(std::get<std::int64_t>(*reader.attribute("optimizer", "saved_sharded_over")), world_size());
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(*reader.attribute("optimizer", "param_group_sizes")),
            (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(std::get<std::int64_t>(*reader.attribute("optimizer/state/5", "step")), kSaveAt);
}

TEST_F(ShardedCheckpoint, ResumesWithStageTwoUnderOtherBuckets) {
  expect_close_to_uninterrupted(resume(MPI_COMM_WORLD, world.get(), acc::ZeroStage::Gradients, 29 * kFloats),
                                "stage 2, buckets of 29 floats");
}

TEST_F(ShardedCheckpoint, ResumesWithStageOneOnHalfTheRanks) {
  const int half = std::max(1, world_size() / 2);
  std::vector<int> ranks(static_cast<std::size_t>(half));
  std::iota(ranks.begin(), ranks.end(), 0);
  acc::ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(60);
  options.abort_on_timeout = true;
  auto group = acc::ProcessGroup::new_group(state, ranks, options);
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, group ? 0 : MPI_UNDEFINED, world_rank(), &comm);
  if (group) {
    expect_close_to_uninterrupted(resume(comm, group.get(), acc::ZeroStage::OptimizerState, 11 * kFloats),
                                  "stage 1 on " + std::to_string(half) + " ranks");
    MPI_Comm_free(&comm);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(ShardedCheckpoint, ResumesWithoutShardingOnOneRank) {
  if (world_rank() == 0) {
    expect_close_to_uninterrupted(resume(MPI_COMM_SELF, nullptr, std::nullopt, 0), "no sharding on one rank");
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
