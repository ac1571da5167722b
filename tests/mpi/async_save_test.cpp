// Asynchronous save_state at 1, 2 and 4 ranks: the call returns once the
// state is copied, and what is written is the state at the call however
// training changes it meanwhile; a resumed run matches the synchronous one;
// the background write's failure reaches every rank at the next wait; a rank
// whose copy fails stops every rank at once; the snapshot reuses its buffers.
// Runs with ACCELERATE_MPI_THREAD_LEVEL=multiple (tests/mpi/training.cmake).
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "accelerate/checkpoint/checkpoint_directory.hpp"
#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/training/accelerator.hpp"
#include "common/gpu_skip.hpp"
#include "common/test_helpers.hpp"
#include "checkpoint/hdf5_turn.hpp"
#include "training_state/state_snapshot.hpp"

namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
namespace fs = std::filesystem;
using acc::testing::world_rank;
using acc::testing::world_size;

class AsyncSave : public ::testing::Test {
 protected:
  void SetUp() override {
    if (acc::testing::ranks_share_a_gpu()) GTEST_SKIP() << acc::testing::kRanksShareAGpu;
  }
};

constexpr int64_t kFeatures = 6;

struct Net : torch::nn::Module {
  Net() {
    torch::manual_seed(3);
    fc1 = register_module("fc1", torch::nn::Linear(kFeatures, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::tanh(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// One training run on fixed data: `steps` AdamW steps, each on this rank's rows.
acc::AcceleratorOptions options_for(const fs::path& project, std::optional<int> total_limit, bool on_each_node) {
  acc::AcceleratorOptions options;
  options.project_config.project_dir = project.string();
  options.project_config.automatic_checkpoint_naming = true;
  options.project_config.total_limit = total_limit;
  options.project_config.save_on_each_node = on_each_node;
  return options;
}

// Emulated nodes of two ranks (one at 1 rank) for save_on_each_node.
std::shared_ptr<acc::State> two_ranks_per_node() {
  acc::StateOptions nodes;
  nodes.emulated_ranks_per_node = world_size() >= 2 ? 2 : 1;
  nodes.thread_level = acc::ThreadLevel::Multiple;
  return std::make_shared<acc::State>(nodes);
}

struct Trainer {
  // With a State: its emulated nodes, and save_on_each_node.
  explicit Trainer(const fs::path& project, std::optional<int> total_limit = std::nullopt,
                   const std::shared_ptr<acc::State>& state = nullptr)
      : accelerator(state ? acc::Accelerator(state, options_for(project, total_limit, true))
                          : acc::Accelerator(options_for(project, total_limit, false))),
        net(std::make_shared<Net>()),
        adamw(net->parameters(), torch::optim::AdamWOptions(0.05)) {
    auto [m, o] = accelerator.prepare(net, adamw);
    model = m;
    optimizer = o;
    torch::manual_seed(11);
    inputs = torch::randn({8 * world_size(), kFeatures});
    targets = inputs.sum(1, true).sin();
  }
  void train(int steps) {
    const int64_t rows = inputs.size(0) / world_size();
    for (int s = 0; s < steps; ++s) {
      const auto x = inputs.narrow(0, rows * world_rank(), rows);
      const auto y = targets.narrow(0, rows * world_rank(), rows);
      accelerator.backward(torch::mse_loss(model->forward<Net>(x), y));
      optimizer->step();
      optimizer->zero_grad();
    }
  }
  std::vector<torch::Tensor> parameters() const {
    std::vector<torch::Tensor> copies;
    for (const auto& p : net->parameters()) copies.push_back(p.detach().clone());
    return copies;
  }

  acc::Accelerator accelerator;
  std::shared_ptr<Net> net;
  torch::optim::AdamW adamw;
  std::shared_ptr<acc::DistributedModel> model;
  std::shared_ptr<acc::AcceleratedOptimizer> optimizer;
  torch::Tensor inputs, targets;
};

void expect_same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

// Holds the background thread before it writes (the hook of async_state_saver.cpp).
class DelayedWrite {
 public:
  explicit DelayedWrite(const char* seconds) { ::setenv("ACCELERATE_TEST_ASYNC_SAVE_DELAY", seconds, 1); }
  ~DelayedWrite() { ::unsetenv("ACCELERATE_TEST_ASYNC_SAVE_DELAY"); }
};

TEST_F(AsyncSave, WritesTheStateAsItWasAtTheCallWhileTrainingGoesOn) {
  const fs::path project = acc::testing::shared_temp_directory("async_snapshot");
  std::vector<torch::Tensor> at_save;
  fs::path saved;
  {
    Trainer run(project);
    run.train(3);
    at_save = run.parameters();
    {
      // The write starts after the next steps have changed every parameter
      // and the optimizer's moments: only a copy taken at the call has the
      // values of the call.
      const DelayedWrite delayed("0.5");
      saved = run.accelerator.save_state(std::nullopt, {.async_save = true});
      EXPECT_EQ(saved, project / "checkpoints" / "checkpoint_0");
      EXPECT_TRUE(run.accelerator.save_in_progress());
      run.train(3);
      EXPECT_FALSE(fs::exists(saved)) << "the call waited for the write";
      EXPECT_EQ(run.accelerator.wait_for_save(), saved);
    }
    EXPECT_FALSE(run.accelerator.wait_for_save().has_value());  // nothing in flight any more
    EXPECT_FALSE(run.accelerator.save_in_progress());
    EXPECT_TRUE(acc::checkpoint::read_complete_manifest(saved).has_value());
  }
  // Resumed from the asynchronous checkpoint, three more steps end where a
  // synchronous save and three more steps end.
  Trainer resumed(project);
  resumed.accelerator.load_state(saved);
  expect_same(resumed.parameters(), at_save);
  resumed.train(3);

  const fs::path sync_project = acc::testing::shared_temp_directory("async_snapshot_sync");
  Trainer reference(sync_project);
  reference.train(3);
  reference.accelerator.save_state();
  Trainer reference_resumed(sync_project);
  reference_resumed.accelerator.load_state();
  reference_resumed.train(3);
  expect_same(resumed.parameters(), reference_resumed.parameters());
  acc::testing::remove_shared_directory(project);
  acc::testing::remove_shared_directory(sync_project);
}

TEST_F(AsyncSave, ProjectConfigurationMakesEverySaveAsynchronousAndRotationWaitsForTheCommit) {
  const fs::path project = acc::testing::shared_temp_directory("async_rotation");
  Trainer run(project, /*total_limit=*/1);
  run.accelerator.project_configuration().async_save = true;
  for (int i = 0; i < 3; ++i) {
    run.train(1);
    // The second and third saves wait for the one before.
    EXPECT_EQ(run.accelerator.save_state(), project / "checkpoints" / ("checkpoint_" + std::to_string(i)));
  }
  // latest_checkpoint waits for the save in flight, which is the newest.
  EXPECT_EQ(run.accelerator.latest_checkpoint(), project / "checkpoints" / "checkpoint_2");
  const auto kept = acc::checkpoint::list_checkpoints(project / "checkpoints");
  ASSERT_EQ(kept.size(), 1U);
  EXPECT_EQ(kept[0].filename(), "checkpoint_2");
  run.accelerator.end_training();
  acc::testing::remove_shared_directory(project);
}

TEST_F(AsyncSave, EachNodeWritesItsOwnFileOnItsNodeCommunicator) {
  const fs::path project = acc::testing::shared_temp_directory("async_each_node");
  const auto state = two_ranks_per_node();
  std::vector<torch::Tensor> at_save;
  fs::path saved;
  {
    Trainer run(project, std::nullopt, state);
    run.train(2);
    at_save = run.parameters();
    saved = run.accelerator.save_state(std::nullopt, {.async_save = true});
    run.train(2);
    EXPECT_EQ(run.accelerator.wait_for_save(), saved);
  }
  // One file per node, side by side where the nodes share the directory.
  for (int node = 0; node < state->num_nodes(); ++node) {
    EXPECT_TRUE(fs::exists(saved / ("state.node" + std::to_string(node) + ".h5"))) << "node " << node;
  }
  Trainer resumed(project, std::nullopt, state);
  resumed.accelerator.load_state(saved);
  expect_same(resumed.parameters(), at_save);
  acc::testing::remove_shared_directory(project);
}

TEST_F(AsyncSave, AFailedBackgroundWriteIsThrownOnEveryRankByTheNextWait) {
  const fs::path project = acc::testing::shared_temp_directory("async_failure");
  Trainer run(project);
  run.train(1);
  const fs::path good = run.accelerator.save_state(std::nullopt, {.async_save = true});
  ASSERT_EQ(run.accelerator.wait_for_save(), good);
  // A directory under a regular file cannot be made: the background write fails.
  if (world_rank() == 0) std::ofstream(project / "not_a_directory") << "x";
  run.accelerator.wait_for_everyone();
  run.accelerator.project_configuration().automatic_checkpoint_naming = false;
  const fs::path bad = project / "not_a_directory" / "checkpoint";
  EXPECT_EQ(run.accelerator.save_state(bad, {.async_save = true}), bad);  // the copy succeeded
  const std::string message = acc::testing::error_of<acc::Error>([&] { (void)run.accelerator.wait_for_save(); });
  EXPECT_NE(message.find("not_a_directory"), std::string::npos) << message;
  EXPECT_FALSE(run.accelerator.wait_for_save().has_value());  // reported once
  EXPECT_TRUE(acc::checkpoint::read_complete_manifest(good).has_value());
  // The saver goes on: the next save commits.
  const fs::path next = project / "after_failure";
  EXPECT_EQ(run.accelerator.save_state(next, {.async_save = true}), next);
  EXPECT_EQ(run.accelerator.wait_for_save(), next);
  acc::testing::remove_shared_directory(project);
}

TEST_F(AsyncSave, ARankWhoseCopyFailsStopsEveryRankBeforeAnythingIsWritten) {
  const fs::path project = acc::testing::shared_temp_directory("async_copy_failure");
  Trainer run(project);
  const bool fails_here = world_rank() == world_size() - 1;
  run.accelerator.register_for_checkpointing(acc::checkpoint::TensorState{
      .save = [fails_here]() -> std::map<std::string, torch::Tensor> {
        if (fails_here) throw std::runtime_error("the registered object cannot be saved");
        return {{"x", torch::ones({2})}};
      },
      .load = [](const std::map<std::string, torch::Tensor>&) {}});
  const std::string message = acc::testing::error_of<acc::ConfigError>(
      [&] { (void)run.accelerator.save_state(std::nullopt, {.async_save = true}); });
  EXPECT_NE(message.find(fails_here ? "cannot be saved" : "on another rank"), std::string::npos) << message;
  EXPECT_FALSE(run.accelerator.wait_for_save().has_value());
  EXPECT_FALSE(acc::checkpoint::latest_checkpoint(project / "checkpoints").has_value());
  acc::testing::remove_shared_directory(project);
}

// Sharded weights and optimizer state go through the snapshot as pieces:
// the asynchronous file holds every entry the synchronous one holds, equal.
TEST_F(AsyncSave, ShardedStatesAreWrittenAsTheSynchronousSaveWritesThem) {
  for (const std::string strategy : {"SHARD_GRAD_OP", "FULL_SHARD"}) {
    SCOPED_TRACE(strategy);
    const fs::path dir = acc::testing::shared_temp_directory("async_sharded");
    {
      acc::AcceleratorOptions options;
      options.fsdp_plugin = acc::FullyShardedDataParallelPlugin{.sharding_strategy = strategy};
      acc::Accelerator accelerator(options);
      torch::manual_seed(5);
      torch::nn::Sequential net(torch::nn::Linear(kFeatures, 16), torch::nn::Tanh(), torch::nn::Linear(16, 1));
      torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.01));
      auto [model, optimizer] = accelerator.prepare(net, adam);
      torch::manual_seed(20 + world_rank());
      for (int step = 0; step < 2; ++step) {
        const auto x = torch::randn({4, kFeatures});
        accelerator.backward(torch::mse_loss(model(x), x.sum(1, true).cos()));
        optimizer->step();
        optimizer->zero_grad();
      }
      accelerator.save_state(dir / "sync");
      accelerator.save_state(dir / "async", {.async_save = true});
      ASSERT_EQ(accelerator.wait_for_save(), dir / "async");
    }
    acc::checkpoint::CheckpointReader sync({.comm = MPI_COMM_WORLD, .file = dir / "sync" / "state.h5"});
    acc::checkpoint::CheckpointReader async({.comm = MPI_COMM_WORLD, .file = dir / "async" / "state.h5"});
    const auto entries = sync.entries();
    ASSERT_EQ(entries.size(), async.entries().size());
    bool pieces_seen = false;
    for (const auto& entry : entries) {
      const std::string& name = entry.spec.name;
      pieces_seen = pieces_seen || name.rfind("optimizer/state/", 0) == 0;
      if (entry.kind == acc::checkpoint::EntryKind::PerRank) {
        EXPECT_TRUE(torch::equal(sync.read_per_rank(name), async.read_per_rank(name))) << name;
      } else {
        EXPECT_TRUE(torch::equal(sync.read_replicated(name), async.read_replicated(name))) << name;
      }
    }
    EXPECT_TRUE(pieces_seen);
    acc::testing::remove_shared_directory(dir);
  }
}

// HDF5 serves one thread at a time: a file open on the calling thread would
// make the writer thread wait for it forever.
TEST_F(AsyncSave, AFileOpenOnTheCallingThreadIsRefusedBeforeAnythingIsCopied) {
  const fs::path project = acc::testing::shared_temp_directory("async_open_file");
  Trainer run(project);
  const fs::path first = run.accelerator.save_state();
  {
    acc::checkpoint::CheckpointReader open({.comm = MPI_COMM_WORLD, .file = first / "state.h5"});
    const std::string message = acc::testing::error_of<acc::ConfigError>(
        [&] { (void)run.accelerator.save_state(std::nullopt, {.async_save = true}); });
    EXPECT_NE(message.find("a checkpoint file is open on this thread"), std::string::npos) << message;
  }
  EXPECT_EQ(run.accelerator.save_state(std::nullopt, {.async_save = true}).filename(), "checkpoint_1");
  EXPECT_EQ(run.accelerator.wait_for_save()->filename(), "checkpoint_1");
  acc::testing::remove_shared_directory(project);
}

TEST_F(AsyncSave, AnotherThreadWaitsForTheHdf5Turn) {
  using acc::checkpoint::detail::Hdf5Turn;
  std::atomic<bool> entered{false};
  std::thread other;
  {
    const Hdf5Turn mine;
    EXPECT_TRUE(Hdf5Turn::held_by_this_thread());
    other = std::thread([&entered] {
      const Hdf5Turn theirs;
      entered = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_FALSE(entered.load()) << "another thread entered HDF5 while this one held it";
  }
  other.join();
  EXPECT_TRUE(entered.load());
  EXPECT_FALSE(Hdf5Turn::held_by_this_thread());
}

// The replay sees the values of the copy, and the next snapshot of the same
// shapes allocates nothing.
class RecordingWriter final : public acc::checkpoint::detail::StateWriter {
 public:
  void write_replicated(std::string_view name, const at::Tensor& tensor) override {
    seen.emplace_back(std::string(name), tensor.clone());
  }
  void write_pieces(std::string_view, c10::ScalarType, at::IntArrayRef, std::vector<acc::checkpoint::TensorPiece>) override {}
  void write_per_rank(std::string_view name, const at::Tensor& tensor) override {
    seen.emplace_back(std::string(name), tensor.clone());
  }
  void set_attribute(std::string_view, std::string_view, const acc::checkpoint::AttributeValue&) override {}
  [[nodiscard]] int size() const override { return 1; }
  std::vector<std::pair<std::string, at::Tensor>> seen;
};

TEST_F(AsyncSave, TheSnapshotCopiesAndReusesItsBuffers) {
  acc::checkpoint::detail::StateSnapshot snapshot;
  at::Tensor weight = torch::arange(6, torch::kFloat).reshape({2, 3});
  at::Tensor step = torch::tensor({7}, torch::kLong);
  snapshot.begin(1);
  snapshot.write_replicated("w", weight);
  snapshot.write_per_rank("s", step);
  EXPECT_EQ(snapshot.buffers_allocated(), 2U);
  weight.add_(100);
  step.add_(1);
  RecordingWriter first;
  snapshot.replay(first);
  ASSERT_EQ(first.seen.size(), 2U);
  EXPECT_TRUE(torch::equal(first.seen[0].second, torch::arange(6, torch::kFloat).reshape({2, 3})));
  EXPECT_EQ(first.seen[1].second.item<int64_t>(), 7);

  snapshot.begin(1);
  snapshot.write_replicated("w", weight);
  snapshot.write_per_rank("s", step);
  EXPECT_EQ(snapshot.buffers_allocated(), 0U);
  EXPECT_EQ(snapshot.buffer_bytes(), 6 * sizeof(float) + sizeof(int64_t));
  RecordingWriter second;
  snapshot.replay(second);
  EXPECT_TRUE(torch::equal(second.seen[0].second, weight));
  EXPECT_EQ(second.seen[1].second.item<int64_t>(), 8);
}

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
