// Accelerator::save_state / load_state at 1, 2 and 4 ranks: a run resumed
// from a checkpoint ends bit-identical to the uninterrupted run (model, Adam
// state, schedule, data position, RNG), numbering and rotation continue,
// and bad loads fail with the reason on every rank.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "accelerate/checkpoint/checkpoint_directory.hpp"
#include "accelerate/checkpoint/safetensors.hpp"
#include "accelerate/error.hpp"
#include "accelerate/modeling/load_checkpoint.hpp"
#include "accelerate/runtime/environment.hpp"
#include "accelerate/training/accelerator.hpp"
#include "common/gpu_skip.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
namespace fs = std::filesystem;
using acc::testing::world_size;

// The suite's fixture: with a GPU visible these tests train on it, which
// needs a GPU per rank (common/gpu_skip.hpp).
class AcceleratorCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    if (acc::testing::ranks_share_a_gpu()) GTEST_SKIP() << acc::testing::kRanksShareAGpu;
  }
};

constexpr int64_t kFeatures = 5;

class NoisyDataset : public torch::data::datasets::Dataset<NoisyDataset> {
 public:
  explicit NoisyDataset(int64_t n) {
    torch::manual_seed(99);
    inputs_ = torch::randn({n, kFeatures});
    targets_ = inputs_.mean(1, true).cos();
  }
  torch::data::Example<> get(size_t i) override { return {inputs_[i], targets_[i]}; }
  torch::optional<size_t> size() const override { return static_cast<size_t>(inputs_.size(0)); }

 private:
  torch::Tensor inputs_, targets_;
};

struct Net : torch::nn::Module {
  explicit Net(int64_t init_seed, bool extra = false) {
    torch::manual_seed(init_seed);
    fc1 = register_module("fc1", torch::nn::Linear(kFeatures, 8));
    fc2 = register_module("fc2", torch::nn::Linear(8, 1));
    if (extra) register_parameter("extra", torch::zeros({3}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    // Dropout draws from the CPU generator: a resumed run must restore it.
    return fc2->forward(torch::dropout(torch::tanh(fc1->forward(x)), 0.2, is_training()));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

struct TrainingRun {
  std::vector<torch::Tensor> parameters;
  std::vector<double> losses;
  double lr = 0;
};

constexpr int kEpochs = 2;

// Trains kEpochs over a shuffled loader; saves after `save_after` optimizer
// steps (0: never); stops after `stop_after` steps (-1: never); resumes from
// the newest checkpoint when `resume`.
TrainingRun train(const fs::path& project, int save_after, int stop_after, bool resume, int64_t init_seed = 1) {
  acc::Accelerator accelerator({.gradient_accumulation_steps = 2,
                                .dataloader_config = {.data_seed = 42},
                                .project_config = {.project_dir = project.string(),
                                                   .automatic_checkpoint_naming = true,
                                                   .total_limit = 2}});
  auto net = std::make_shared<Net>(init_seed);
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.01));
  torch::optim::StepLR schedule(adam, 2, 0.7);
  auto [model, optimizer, scheduler, loader] = accelerator.prepare(
      net, adam, schedule, acc::data_loader(NoisyDataset(48), {.batch_size = 12 / world_size(), .shuffle = true}));
  torch::manual_seed(5);  // the same generator state at the start of every fresh run
  TrainingRun run;
  if (resume) {
    const auto loaded = accelerator.load_state();
    EXPECT_EQ(loaded.step, save_after);
    EXPECT_EQ(accelerator.step(), save_after);
  }
  for (int64_t epoch = loader->epoch(); epoch < kEpochs; ++epoch) {
    loader->set_epoch(epoch);
    for (const auto& batch : *loader) {
      auto scope = accelerator.accumulate(*model);
      auto loss = torch::mse_loss(model->forward<Net>(batch.data), batch.target);
      accelerator.backward(loss);
      optimizer->step();
      scheduler->step();
      optimizer->zero_grad();
      if (accelerator.sync_gradients()) {
        run.losses.push_back(accelerator.reduce(loss.detach()).item<double>());
        if (accelerator.step() == save_after && !resume) accelerator.save_state();
        if (accelerator.step() == stop_after) return run;
      }
    }
  }
  for (const auto& p : net->parameters()) run.parameters.push_back(p.detach().cpu().clone());
  run.lr = adam.param_groups()[0].options().get_lr();
  return run;
}

TEST_F(AcceleratorCheckpoint, ResumedRunIsBitIdenticalToTheUninterruptedOne) {
  const fs::path a = acc::testing::shared_temp_directory("resume_a");
  const fs::path b = acc::testing::shared_temp_directory("resume_b");
  // 48 samples, global batch 12, 2 micro-steps per step: 2 steps per epoch,
  // 4 in all. The interrupted run saves after step 1, in the middle of epoch 0.
  const TrainingRun uninterrupted = train(a, /*save_after=*/0, /*stop_after=*/-1, false);
  (void)train(b, /*save_after=*/1, /*stop_after=*/1, false);
  ASSERT_TRUE(acc::checkpoint::latest_checkpoint(b / "checkpoints").has_value());
  const TrainingRun resumed = train(b, /*save_after=*/1, -1, /*resume=*/true, /*init_seed=*/777);
  ASSERT_EQ(resumed.parameters.size(), uninterrupted.parameters.size());
  for (size_t i = 0; i < resumed.parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed.parameters[i], uninterrupted.parameters[i])) << "parameter " << i;
  }
  EXPECT_EQ(resumed.lr, uninterrupted.lr);
  ASSERT_FALSE(resumed.losses.empty());
  EXPECT_EQ(resumed.losses.back(), uninterrupted.losses.back());
  acc::testing::remove_shared_directory(a);
  acc::testing::remove_shared_directory(b);
}

TEST_F(AcceleratorCheckpoint, NumberingContinuesAndRotationKeepsTheNewest) {
  const fs::path project = acc::testing::shared_temp_directory("numbering");
  {
    acc::Accelerator accelerator(
        {.project_config = {.project_dir = project.string(), .automatic_checkpoint_naming = true, .total_limit = 2}});
    auto net = std::make_shared<Net>(1);
    auto model = accelerator.prepare(net);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(accelerator.save_state(), project / "checkpoints" / ("checkpoint_" + std::to_string(i)));
    }
    const auto kept = acc::checkpoint::list_checkpoints(project / "checkpoints");
    ASSERT_EQ(kept.size(), 2U);
    EXPECT_EQ(kept[0].filename(), "checkpoint_1");
    EXPECT_EQ(kept[1].filename(), "checkpoint_2");
    const auto message = acc::testing::error_of<acc::ConfigError>([&] { accelerator.save_state(project / "x"); });
    EXPECT_NE(message.find("automatic_checkpoint_naming"), std::string::npos) << message;
  }
  acc::Accelerator accelerator(
      {.project_config = {.project_dir = project.string(), .automatic_checkpoint_naming = true, .total_limit = 2}});
  auto net = std::make_shared<Net>(1);
  auto model = accelerator.prepare(net);
  const auto loaded = accelerator.load_state();
  EXPECT_EQ(loaded.directory.filename(), "checkpoint_2");
  EXPECT_EQ(loaded.saved_world_size, world_size());
  EXPECT_EQ(accelerator.project_configuration().iteration, 3);
  EXPECT_EQ(accelerator.save_state().filename(), "checkpoint_3");
  acc::testing::remove_shared_directory(project);
}

TEST_F(AcceleratorCheckpoint, StrictLoadListsEveryMismatchedKey) {
  const fs::path dir = acc::testing::shared_temp_directory("strict");
  {
    acc::Accelerator accelerator;
    auto model = accelerator.prepare(std::make_shared<Net>(1));
    accelerator.save_state(dir / "ckpt");
  }
  acc::Accelerator accelerator;
  auto net = std::make_shared<Net>(2, /*extra=*/true);
  auto model = accelerator.prepare(net);
  const auto message = acc::testing::error_of<acc::ConfigError>([&] { accelerator.load_state(dir / "ckpt"); });
  EXPECT_NE(message.find("extra"), std::string::npos) << message;
  // Non-strict: what matches is loaded, the rest reported.
  const auto loaded = accelerator.load_state(dir / "ckpt", /*strict=*/false);
  ASSERT_EQ(loaded.key_problems.count("pytorch_model"), 1U);
  EXPECT_NE(loaded.key_problems.at("pytorch_model").find("extra"), std::string::npos);
  EXPECT_TRUE(torch::equal(net->fc1->weight.cpu(), Net(1).fc1->weight));
  acc::testing::remove_shared_directory(dir);
}

TEST_F(AcceleratorCheckpoint, LoadCheckpointInModelReadsTheModelOfAnHdf5Checkpoint) {
  const fs::path dir = acc::testing::shared_temp_directory("in_model");
  {
    acc::Accelerator accelerator;
    auto model = accelerator.prepare(std::make_shared<Net>(4));
    accelerator.save_state(dir / "ckpt");
  }
  Net net(5);
  std::map<std::string, torch::Tensor> destinations;
  for (const auto& item : net.named_parameters()) destinations.emplace(item.key(), item.value());
  const auto report = acc::checkpoint::load_checkpoint_in_model(destinations, dir / "ckpt", /*strict=*/true);
  EXPECT_TRUE(report.empty()) << report.to_string();
  Net expected(4);
  EXPECT_TRUE(torch::equal(net.fc1->weight, expected.fc1->weight));
  EXPECT_TRUE(torch::equal(net.fc2->bias, expected.fc2->bias));
  // Into a module, tensor by tensor, in bf16.
  Net in_bf16(6);
  acc::LoadCheckpointOptions options;
  options.dtype = torch::kBFloat16;
  options.strict = true;
  EXPECT_TRUE(acc::load_checkpoint_in_model(in_bf16, dir / "ckpt", options).empty());
  EXPECT_EQ(in_bf16.fc1->weight.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(in_bf16.fc1->weight, expected.fc1->weight.to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(in_bf16.fc2->bias, expected.fc2->bias.to(torch::kBFloat16)));
  acc::testing::remove_shared_directory(dir);
}

TEST_F(AcceleratorCheckpoint, SaveOnEachNodeWritesAndReadsOneFilePerNode) {
  const fs::path project = acc::testing::shared_temp_directory("each_node");
  // Every rank its own (emulated) node, so each writes and reads its own file.
  auto one_rank_per_node = acc::patch_environment({{"ACCELERATE_EMULATED_RANKS_PER_NODE", "1"}});
  const acc::AcceleratorOptions options{.project_config = {.project_dir = project.string(),
                                                           .automatic_checkpoint_naming = true,
                                                           .save_on_each_node = true}};
  fs::path saved;
  {
    acc::Accelerator accelerator(options);
    ASSERT_EQ(accelerator.state().num_nodes(), world_size());
    auto model = accelerator.prepare(std::make_shared<Net>(8));
    saved = accelerator.save_state();
  }
  for (int node = 0; node < world_size(); ++node) {
    EXPECT_TRUE(fs::exists(saved / ("state.node" + std::to_string(node) + ".h5"))) << "node " << node;
  }
  acc::Accelerator accelerator(options);
  auto net = std::make_shared<Net>(9);
  auto model = accelerator.prepare(net);
  EXPECT_EQ(accelerator.load_state().directory, saved);
  EXPECT_TRUE(torch::equal(net->fc1->weight.cpu(), Net(8).fc1->weight));
  // The exported-model loader reads such a directory too (any node's file holds the model).
  Net other(10);
  std::map<std::string, torch::Tensor> destinations;
  for (const auto& item : other.named_parameters()) destinations.emplace(item.key(), item.value());
  EXPECT_TRUE(acc::checkpoint::load_checkpoint_in_model(destinations, saved, /*strict=*/true).empty());
  EXPECT_TRUE(torch::equal(other.fc2->weight, Net(8).fc2->weight));
  acc::testing::remove_shared_directory(project);
}

TEST_F(AcceleratorCheckpoint, MissingCheckpointAndUnsupportedOptimizerAreClearErrors) {
  const fs::path project = acc::testing::shared_temp_directory("missing");
  acc::Accelerator accelerator(
      {.project_config = {.project_dir = project.string(), .automatic_checkpoint_naming = true}});
  auto net = std::make_shared<Net>(1);
  torch::optim::LBFGS lbfgs(net->parameters());
  auto [model, optimizer] = accelerator.prepare(net, lbfgs);
  EXPECT_FALSE(accelerator.latest_checkpoint().has_value());
  auto message = acc::testing::error_of<acc::ConfigError>([&] { accelerator.load_state(); });
  EXPECT_NE(message.find("no complete checkpoint"), std::string::npos) << message;
  message = acc::testing::error_of<acc::ConfigError>([&] { accelerator.save_state(); });
  EXPECT_NE(message.find("SGD, Adam, AdamW, Adagrad and RMSprop"), std::string::npos) << message;
  EXPECT_FALSE(accelerator.latest_checkpoint().has_value());  // nothing half-written became visible
  acc::testing::remove_shared_directory(project);
}

// An overwrite of save_state(dir) that crashed between its two renames (on a
// file system without an atomic exchange) leaves the old checkpoint aside and
// the new one complete under a hidden name, nothing under `dir`:
// load_state(dir) puts the new one back under its name and loads it.
TEST_F(AcceleratorCheckpoint, LoadStateRecoversAnOverwriteInterruptedBetweenItsRenames) {
  const fs::path project = acc::testing::shared_temp_directory("recover_on_load");
  acc::Accelerator accelerator({.project_config = {.project_dir = project.string()}});
  auto net = std::make_shared<Net>(1);
  auto model = accelerator.prepare(net);
  accelerator.save_state(project / "ck");
  std::vector<torch::Tensor> newer;
  {
    const torch::NoGradGuard no_grad;
    for (auto& p : net->parameters()) newer.push_back(p.add_(1.5).detach().clone());
  }
  accelerator.save_state(project / "next");
  MPI_Barrier(MPI_COMM_WORLD);
  if (acc::testing::world_rank() == 0) {
    fs::rename(project / "ck", project / ".ck.old-aaaa");
    fs::rename(project / "next", project / ".ck.tmp-bbbb");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    const torch::NoGradGuard no_grad;
    for (auto& p : net->parameters()) p.zero_();
  }
  const auto loaded = accelerator.load_state(project / "ck");
  EXPECT_EQ(loaded.directory, project / "ck");
  const auto parameters = net->parameters();
  ASSERT_EQ(parameters.size(), newer.size());
  for (std::size_t i = 0; i < newer.size(); ++i) EXPECT_TRUE(torch::equal(parameters[i].cpu(), newer[i].cpu())) << i;
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_FALSE(fs::exists(project / ".ck.tmp-bbbb"));
  acc::testing::remove_shared_directory(project);
}

// The Accelerate idiom `if is_main_process: save_state()` is wrong here (the
// save is parallel): it must end in a TimeoutError that says so, not a hang.
TEST_F(AcceleratorCheckpoint, SaveStateOnTheMainProcessOnlyIsATimeoutNotAHang) {
  if (world_size() < 2) GTEST_SKIP() << "needs a second rank";
  const fs::path project = acc::testing::shared_temp_directory("main_only");
  acc::Accelerator accelerator({.project_config = {.project_dir = project.string(), .automatic_checkpoint_naming = true},
                                .init_kwargs = {.timeout = std::chrono::seconds(1)}});
  auto net = std::make_shared<Net>(1);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  if (accelerator.is_main_process()) {
    const auto message = acc::testing::error_of<acc::TimeoutError>([&] { accelerator.save_state(); });
    EXPECT_NE(message.find("save_state, which every process must call"), std::string::npos) << message;
  }
  MPI_Barrier(MPI_COMM_WORLD);  // the main process has timed out
  if (!accelerator.is_main_process()) accelerator.wait_for_everyone();  // completes its pending barrier
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_FALSE(fs::exists(project / "checkpoints" / "checkpoint_0"));
  acc::testing::remove_shared_directory(project);
}

class IndexDataset : public torch::data::datasets::Dataset<IndexDataset> {
 public:
  explicit IndexDataset(int64_t n) : n_(n) {}
  torch::data::Example<> get(size_t i) override { return {torch::full({1}, static_cast<double>(i)), torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return static_cast<size_t>(n_); }

 private:
  int64_t n_;
};

int64_t samples_in_one_pass(acc::Accelerator& accelerator, acc::DataLoader& loader) {
  int64_t count = 0;
  for (const auto& batch : loader) count += accelerator.gather_for_metrics(batch.data).size(0);
  return count;
}

TEST_F(AcceleratorCheckpoint, LoaderSavedAfterAFinishedPassStartsTheNextEpochWhole) {
  const fs::path dir = acc::testing::shared_temp_directory("finished_pass");
  {
    acc::Accelerator accelerator;
    auto eval = accelerator.prepare(acc::data_loader(IndexDataset(10), {.batch_size = 2}));
    EXPECT_EQ(samples_in_one_pass(accelerator, *eval), 10);
    accelerator.save_state(dir / "ckpt");
  }
  acc::Accelerator accelerator;
  auto eval = accelerator.prepare(acc::data_loader(IndexDataset(10), {.batch_size = 2}));
  accelerator.load_state(dir / "ckpt");
  EXPECT_EQ(eval->epoch(), 1);
  EXPECT_EQ(samples_in_one_pass(accelerator, *eval), 10);  // not an empty remainder of epoch 0
  acc::testing::remove_shared_directory(dir);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
