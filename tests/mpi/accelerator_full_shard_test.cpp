// FULL_SHARD (ZeRO stage 3) through the Accelerator at 1, 2 and 4 ranks: a
// Sequential prepared with fsdp_plugin FULL_SHARD trains with gradient
// accumulation to where NO_SHARD ends, each rank holding 1/N of the
// parameters and of Adam's state; clipping returns NO_SHARD's norms, and
// clipping by value ends where NO_SHARD's does; bf16 ends where NO_SHARD's
// bf16 ends; save_model writes the whole trained model and leaves it sharded;
// save_state/load_state write and read the weights in each rank's pieces
// (never whole) into a file a plain module loads, resume bit-identically,
// and the checkpoint resumes
// under NO_SHARD and SHARD_GRAD_OP (and a NO_SHARD one under FULL_SHARD)
// within rounding, and on half the ranks, on one rank, and (saved on half)
// on all of them;
// HYBRID_SHARD on emulated nodes shards within each node, ends where NO_SHARD
// ends and resumes; a model that is not a Sequential, LocalSGD, and a module
// whose sharded model is gone are refused with the reason.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/error.hpp"
#include "accelerate/modeling/empty_weights.hpp"
#include "accelerate/modeling/load_checkpoint.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/training/accelerator.hpp"
#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"
#include "accelerate/training/fully_sharded_model.hpp"
#include "accelerate/training/local_sgd.hpp"
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

class AcceleratorFullShard : public acc::testing::DefaultDeviceTest {};

// 9*17+17 = 170 and 17*2+2 = 36 parameters in two units.
torch::nn::Sequential make_net() {
  torch::manual_seed(21);
  return torch::nn::Sequential(torch::nn::Linear(9, 17), torch::nn::Tanh(), torch::nn::Linear(17, 2));
}

constexpr int kMicroSteps = 8;  // 4 optimizer steps with 2 micro-steps each

// This rank's micro-batch `i` of fixed global data.
std::pair<torch::Tensor, torch::Tensor> batch(int i) {
  torch::manual_seed(1000 + i);
  const auto x = torch::randn({4 * world_size(), 9});
  const auto y = torch::randn({4 * world_size(), 2});
  return {x.narrow(0, 4 * world_rank(), 4), y.narrow(0, 4 * world_rank(), 4)};
}

acc::AcceleratorOptions options(const std::string& strategy, std::optional<std::string> precision = std::nullopt) {
  acc::AcceleratorOptions o;
  o.mixed_precision = std::move(precision);
  o.gradient_accumulation_steps = 2;
  o.fsdp_plugin = acc::FullyShardedDataParallelPlugin{.sharding_strategy = strategy};
  return o;
}

struct TrainingRun {
  std::vector<torch::Tensor> parameters;  // the whole model, in the Sequential's order
  std::vector<double> norms;
  std::int64_t shard_elements = 0;
  std::int64_t state_elements = 0;
};

// Micro-steps [from, to): first loads `resume_from`, at the end saves to
// `save_to`; with `clip`, SGD and clip_grad_norm_ (or, with a `clip_value`,
// clip_grad_value_) before every step (Adam hides a uniformly scaled
// gradient), else Adam.
TrainingRun train(const std::string& strategy, int from, int to, const std::optional<fs::path>& save_to = std::nullopt,
                  const std::optional<fs::path>& resume_from = std::nullopt, bool clip = false,
                  std::optional<std::string> precision = std::nullopt, int ranks_per_node = 0, double clip_value = 0) {
  // Emulated nodes (HYBRID_SHARD) come with the State.
  acc::StateOptions nodes;
  nodes.emulated_ranks_per_node = ranks_per_node;
  acc::Accelerator accelerator = ranks_per_node > 0 ? acc::Accelerator(std::make_shared<acc::State>(nodes),
                                                                       options(strategy, std::move(precision)))
                                                    : acc::Accelerator(options(strategy, std::move(precision)));
  auto net = make_net();
  std::unique_ptr<torch::optim::Optimizer> chosen;
  if (clip) {
    chosen = std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  } else {
    chosen = std::make_unique<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(0.01));
  }
  auto [model, optimizer] = accelerator.prepare(net, *chosen);
  if (resume_from) accelerator.load_state(*resume_from);
  TrainingRun run;
  for (int i = from; i < to; ++i) {
    auto scope = accelerator.accumulate(*model);
    const auto [x, y] = batch(i);
    accelerator.backward(torch::mse_loss(model(x), y));
    if (clip && clip_value > 0) {
      accelerator.clip_grad_value_(net->parameters(), clip_value);
    } else if (clip) {
      if (const auto norm = accelerator.clip_grad_norm_(net->parameters(), 0.05)) run.norms.push_back(*norm);
    }
    optimizer->step();
    optimizer->zero_grad();
  }
  if (save_to) accelerator.save_state(*save_to);
  if (acc::FullyShardedModel* sharded = model->fully_sharded()) {
    EXPECT_EQ(sharded->whole_parameter_bytes(), 0) << "training or save_state left the parameters whole";
    for (const auto& item : sharded->full_state_dict()) run.parameters.push_back(item.value());
    run.shard_elements = sharded->shard_elements();
  } else {
    for (const auto& p : net->parameters()) run.parameters.push_back(p.detach().clone());
  }
  for (const auto& [key, state] : chosen->state()) {
    if (clip) break;
    const auto& s = static_cast<const torch::optim::AdamParamState&>(*state);
    run.state_elements += s.exp_avg().numel() + s.exp_avg_sq().numel();
  }
  return run;
}

// `run` ends where `reference` ends, within rounding, the same on every rank.
void expect_ends_where(const TrainingRun& run, const TrainingRun& reference, double rtol = 1e-5, double atol = 1e-6) {
  acc::testing::expect_ends_where(run.parameters, reference.parameters, rtol, atol);
}

TEST_F(AcceleratorFullShard, EndsWhereNoShardEndsHoldingAShardOfEverything) {
  const TrainingRun ddp = train("NO_SHARD", 0, kMicroSteps);
  const TrainingRun sharded = train("FULL_SHARD", 0, kMicroSteps);
  expect_ends_where(sharded, ddp);
  const int n = world_size();
  EXPECT_EQ(sharded.shard_elements, (170 + n - 1) / n + (36 + n - 1) / n);
  EXPECT_EQ(ddp.state_elements, 2 * 206);
  EXPECT_EQ(sharded.state_elements, 2 * sharded.shard_elements);
  EXPECT_EQ(train("1", 0, 2).shard_elements, sharded.shard_elements);  // Accelerate's number for FULL_SHARD
}

TEST_F(AcceleratorFullShard, ClipsByTheNormOfTheWholeGradient) {
  const TrainingRun ddp = train("NO_SHARD", 0, kMicroSteps, std::nullopt, std::nullopt, /*clip=*/true);
  const TrainingRun sharded = train("FULL_SHARD", 0, kMicroSteps, std::nullopt, std::nullopt, /*clip=*/true);
  expect_ends_where(sharded, ddp);
  ASSERT_EQ(sharded.norms.size(), ddp.norms.size());
  ASSERT_EQ(ddp.norms.size(), 4U);
  for (std::size_t k = 0; k < ddp.norms.size(); ++k) EXPECT_NEAR(sharded.norms[k], ddp.norms[k], 1e-5 * ddp.norms[k]);
  EXPECT_GT(ddp.norms[0], 0.05);  // the clip was active
}

TEST_F(AcceleratorFullShard, ClipsByValueAsNoShardClips) {
  const TrainingRun ddp = train("NO_SHARD", 0, kMicroSteps, std::nullopt, std::nullopt, true, std::nullopt, 0, 0.02);
  const TrainingRun sharded =
      train("FULL_SHARD", 0, kMicroSteps, std::nullopt, std::nullopt, true, std::nullopt, 0, 0.02);
  expect_ends_where(sharded, ddp);
  // The clip was active: SGD with a bound nothing reaches ends elsewhere, in
  // both strategies (a clip that did nothing would end there).
  for (const char* strategy : {"NO_SHARD", "FULL_SHARD"}) {
    const TrainingRun unclipped =
        train(strategy, 0, kMicroSteps, std::nullopt, std::nullopt, true, std::nullopt, 0, 1e9);
    EXPECT_FALSE(torch::allclose(unclipped.parameters[0], sharded.parameters[0], 1e-4, 1e-5)) << strategy;
  }
}

TEST_F(AcceleratorFullShard, ARegisteredModuleSharingTheShardedParametersIsRefusedWhenSaved) {
  const fs::path dir = acc::testing::shared_temp_directory("accelerator_full_shard_registered");
  acc::Accelerator accelerator(options("FULL_SHARD"));
  auto net = make_net();
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.01));
  auto [model, optimizer] = accelerator.prepare(net, adam);
  accelerator.register_for_checkpointing(net.ptr());  // its parameters hold no memory between uses
  const auto message = acc::testing::error_of([&] { (void)accelerator.save_state(dir / "ckpt"); });
  if (world_size() > 1) {
    EXPECT_NE(message.find("its storage holds no memory"), std::string::npos) << message;
  } else {
    EXPECT_EQ(message, "<no exception>");  // one rank's shard is the whole parameter
  }
  accelerator.wait_for_everyone();
  acc::testing::remove_shared_directory(dir);
}

// `steps` micro-steps of this rank's batches 0, 1, ... on a prepared model.
void micro_steps(acc::Accelerator& accelerator, auto& model, auto& optimizer, int steps) {
  for (int i = 0; i < steps; ++i) {
    auto scope = accelerator.accumulate(*model);
    const auto [x, y] = batch(i);
    accelerator.backward(torch::mse_loss(model(x), y));
    optimizer.step();
    optimizer.zero_grad();
  }
}

// A fresh Sequential of make_net()'s shape, loaded strictly from `checkpoint`
// (a safetensors export or an HDF5 checkpoint), holds exactly `state`.
void expect_file_holds(const fs::path& checkpoint, const torch::OrderedDict<std::string, torch::Tensor>& state) {
  auto fresh = torch::nn::Sequential(torch::nn::Linear(9, 17), torch::nn::Tanh(), torch::nn::Linear(17, 2));
  const auto report = acc::load_checkpoint_in_model(*fresh, checkpoint, {.strict = true});
  EXPECT_TRUE(report.empty()) << report.to_string();
  for (const auto& item : state) {
    EXPECT_TRUE(torch::equal(fresh->named_parameters()[item.key()], item.value())) << item.key();
  }
}

TEST_F(AcceleratorFullShard, SaveModelWritesTheWholeModelAndLeavesItSharded) {
  const fs::path dir = acc::testing::shared_temp_directory("accelerator_full_shard_save_model");
  acc::Accelerator accelerator(options("FULL_SHARD"));
  auto net = make_net();
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.01));
  auto [model, optimizer] = accelerator.prepare(net, adam);
  micro_steps(accelerator, model, *optimizer, 4);
  accelerator.save_model(*model, dir / "model");
  acc::FullyShardedModel* sharded = model->fully_sharded();
  ASSERT_NE(sharded, nullptr);
  EXPECT_EQ(sharded->whole_parameter_bytes(), 0) << "save_model left the parameters whole";
  // Every rank reads the file into a fresh model: the trained parameters, exactly.
  const auto trained = sharded->full_state_dict();
  expect_file_holds(dir / "model", trained);
  EXPECT_FALSE(torch::equal(trained["0.weight"], make_net()->named_parameters()["0.weight"])) << "nothing trained";
  accelerator.wait_for_everyone();
  acc::testing::remove_shared_directory(dir);
}

TEST_F(AcceleratorFullShard, CheckpointsWriteAndReadTheWeightsInPiecesWithoutMakingThemWhole) {
  const fs::path dir = acc::testing::shared_temp_directory("accelerator_full_shard_pieces");
  acc::Accelerator accelerator(options("FULL_SHARD"));
  auto net = make_net();
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.01));
  auto [model, optimizer] = accelerator.prepare(net, adam);
  acc::FullyShardedModel* sharded = model->fully_sharded();
  ASSERT_NE(sharded, nullptr);
  micro_steps(accelerator, model, *optimizer, 2);
  // A registered object is saved and loaded after the model: it sees
  // whether the model was made whole for the checkpoint.
  std::vector<std::int64_t> whole_bytes;
  accelerator.register_for_checkpointing(
      acc::checkpoint::TensorState{.save =
                                       [&] {
                                         whole_bytes.push_back(sharded->whole_parameter_bytes());
                                         return std::map<std::string, torch::Tensor>{{"probe", torch::zeros({1})}};
                                       },
                                   .load =
                                       [&](const std::map<std::string, torch::Tensor>&) {
                                         whole_bytes.push_back(sharded->whole_parameter_bytes());
                                       }});
  const auto trained = sharded->full_state_dict();
  accelerator.save_state(dir / "ckpt");
  // The file holds the whole tensors: a plain module loads them.
  expect_file_holds(dir / "ckpt", trained);
  // Read back into shards that were changed: the pieces land where they were.
  for (const auto& p : sharded->parameters()) p.detach().zero_();
  accelerator.load_state(dir / "ckpt");
  const auto loaded = sharded->full_state_dict();
  for (const auto& item : trained) EXPECT_TRUE(torch::equal(loaded[item.key()], item.value())) << item.key();
  EXPECT_EQ(whole_bytes, (std::vector<std::int64_t>{0, 0}));
  accelerator.wait_for_everyone();
  acc::testing::remove_shared_directory(dir);
}

// Micro-steps [from, to) on the ranks of `comm`, Adam, every rank on the same
// whole batch: the averaged gradient, and so the run, is the same on any
// number of ranks. Loads `resume_from` first, saves to `save_to` at the end;
// returns the whole parameters.
std::vector<torch::Tensor> train_alike(MPI_Comm comm, const std::string& strategy, int from, int to,
                                       const std::optional<fs::path>& save_to,
                                       const std::optional<fs::path>& resume_from) {
  acc::StateOptions state;
  state.comm = comm;
  acc::Accelerator accelerator(std::make_shared<acc::State>(state), options(strategy));
  auto net = make_net();
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.01));
  auto [model, optimizer] = accelerator.prepare(net, adam);
  if (resume_from) accelerator.load_state(*resume_from);
  for (int i = from; i < to; ++i) {
    auto scope = accelerator.accumulate(*model);
    torch::manual_seed(1000 + i);
    const auto x = torch::randn({8, 9});
    const auto y = torch::randn({8, 2});
    accelerator.backward(torch::mse_loss(model(x), y));
    optimizer->step();
    optimizer->zero_grad();
  }
  if (save_to) accelerator.save_state(*save_to);
  std::vector<torch::Tensor> parameters;
  if (acc::FullyShardedModel* sharded = model->fully_sharded()) {
    for (const auto& item : sharded->full_state_dict()) parameters.push_back(item.value());
  } else {
    for (const auto& p : net->parameters()) parameters.push_back(p.detach().clone());
  }
  return parameters;
}

// The first `ranks` ranks of the world, or MPI_COMM_NULL on the others.
MPI_Comm first_ranks(int ranks) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() < ranks ? 0 : MPI_UNDEFINED, world_rank(), &comm);
  return comm;
}

void expect_close(const std::vector<torch::Tensor>& run, const std::vector<torch::Tensor>& reference) {
  ASSERT_EQ(run.size(), reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i) {
    EXPECT_TRUE(torch::allclose(run[i], reference[i], 1e-5, 1e-6))
        << "tensor " << i << " differs by " << (run[i] - reference[i]).abs().max().item<double>();
  }
}

TEST_F(AcceleratorFullShard, ACheckpointResumesOnOtherRankCounts) {
  const fs::path dir = acc::testing::shared_temp_directory("accelerator_full_shard_ranks");
  const std::vector<torch::Tensor> uninterrupted = train_alike(MPI_COMM_WORLD, "FULL_SHARD", 0, kMicroSteps, {}, {});
  const int half = std::max(1, world_size() / 2);
  // Saved on every rank: resumed sharded on half of them, and unsharded on one.
  (void)train_alike(MPI_COMM_WORLD, "FULL_SHARD", 0, kMicroSteps / 2, dir / "all", {});
  for (const auto& [ranks, strategy] : {std::pair{half, "FULL_SHARD"}, std::pair{1, "NO_SHARD"}}) {
    if (MPI_Comm comm = first_ranks(ranks); comm != MPI_COMM_NULL) {
      expect_close(train_alike(comm, strategy, kMicroSteps / 2, kMicroSteps, {}, dir / "all"), uninterrupted);
      MPI_Comm_free(&comm);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // Saved on half the ranks: resumed sharded on all of them.
  if (MPI_Comm comm = first_ranks(half); comm != MPI_COMM_NULL) {
    (void)train_alike(comm, "FULL_SHARD", 0, kMicroSteps / 2, dir / "half", {});
    MPI_Comm_free(&comm);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_close(train_alike(MPI_COMM_WORLD, "FULL_SHARD", kMicroSteps / 2, kMicroSteps, {}, dir / "half"),
               uninterrupted);
  acc::testing::remove_shared_directory(dir);
}

TEST_F(AcceleratorFullShard, Bf16EndsWhereNoShardBf16Ends) {
  // Autocast runs each unit's forward in bf16 over the fp32 shards gathered:
  // the same computation as NO_SHARD's, up to the reduction order.
  const TrainingRun ddp = train("NO_SHARD", 0, kMicroSteps, std::nullopt, std::nullopt, false, "bf16");
  const TrainingRun sharded = train("FULL_SHARD", 0, kMicroSteps, std::nullopt, std::nullopt, false, "bf16");
  expect_ends_where(sharded, ddp, 1e-3, 1e-4);
  const TrainingRun fp32 = train("FULL_SHARD", 0, kMicroSteps);
  EXPECT_FALSE(torch::allclose(sharded.parameters[0], fp32.parameters[0], 1e-5, 1e-6)) << "bf16 did not apply";
}

// HYBRID_SHARD's emulated nodes: 2 nodes of 2 ranks at 4 ranks, 2 of 1 at 2
// (whole units, replicated), one node at 1 rank.
int ranks_per_node() { return std::max(1, world_size() / 2); }

TEST_F(AcceleratorFullShard, HybridShardShardsWithinEachNodeAndEndsWhereNoShardEnds) {
  const int local = ranks_per_node();
  const TrainingRun ddp = train("NO_SHARD", 0, kMicroSteps);
  const TrainingRun hybrid =
      train("HYBRID_SHARD", 0, kMicroSteps, std::nullopt, std::nullopt, false, std::nullopt, local);
  expect_ends_where(hybrid, ddp);
  // Shards of the node's ranks, not of the world's.
  EXPECT_EQ(hybrid.shard_elements, (170 + local - 1) / local + (36 + local - 1) / local);
  EXPECT_EQ(hybrid.state_elements, 2 * hybrid.shard_elements);
  // Its checkpoint (one file, the first node's shards) resumes bit-identically, and under NO_SHARD.
  const fs::path dir = acc::testing::shared_temp_directory("accelerator_full_shard_hybrid");
  (void)train("HYBRID_SHARD", 0, kMicroSteps / 2, dir / "hybrid", std::nullopt, false, std::nullopt, local);
  const TrainingRun resumed =
      train("HYBRID_SHARD", kMicroSteps / 2, kMicroSteps, std::nullopt, dir / "hybrid", false, std::nullopt, local);
  ASSERT_EQ(resumed.parameters.size(), hybrid.parameters.size());
  for (std::size_t i = 0; i < hybrid.parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed.parameters[i], hybrid.parameters[i])) << "parameter " << i;
  }
  expect_ends_where(train("NO_SHARD", kMicroSteps / 2, kMicroSteps, std::nullopt, dir / "hybrid"), hybrid);
  acc::testing::remove_shared_directory(dir);
}

TEST_F(AcceleratorFullShard, ResumesBitIdenticallyAndAcrossShardings) {
  const fs::path dir = acc::testing::shared_temp_directory("accelerator_full_shard_resume");
  const TrainingRun uninterrupted = train("FULL_SHARD", 0, kMicroSteps);
  (void)train("FULL_SHARD", 0, kMicroSteps / 2, dir / "full");
  const TrainingRun resumed = train("FULL_SHARD", kMicroSteps / 2, kMicroSteps, std::nullopt, dir / "full");
  ASSERT_EQ(resumed.parameters.size(), uninterrupted.parameters.size());
  for (std::size_t i = 0; i < uninterrupted.parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed.parameters[i], uninterrupted.parameters[i])) << "parameter " << i;
  }
  // The file holds whole tensors: it resumes without sharding, and an
  // unsharded run's file resumes sharded.
  expect_ends_where(train("NO_SHARD", kMicroSteps / 2, kMicroSteps, std::nullopt, dir / "full"), uninterrupted);
  expect_ends_where(train("SHARD_GRAD_OP", kMicroSteps / 2, kMicroSteps, std::nullopt, dir / "full"), uninterrupted);
  (void)train("NO_SHARD", 0, kMicroSteps / 2, dir / "none");
  expect_ends_where(train("FULL_SHARD", kMicroSteps / 2, kMicroSteps, std::nullopt, dir / "none"), uninterrupted);
  acc::testing::remove_shared_directory(dir);
}

struct NotSequential : torch::nn::Module {
  NotSequential() { fc = register_module("fc", torch::nn::Linear(9, 2)); }
  torch::Tensor forward(const torch::Tensor& x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};

TEST_F(AcceleratorFullShard, RefusesWhatItCannotShardWithTheReason) {
  acc::Accelerator accelerator(options("FULL_SHARD"));
  // A value the plugin cannot honour is named with its field.
  acc::AcceleratorOptions unbuilt = options("FULL_SHARD");
  unbuilt.fsdp_plugin->backward_prefetch = "BACKWARD_PRE";
  auto message = acc::testing::error_of([&] { acc::Accelerator refused(unbuilt); });
  EXPECT_NE(message.find("backward_prefetch = BACKWARD_PRE is not built"), std::string::npos) << message;
  // A model that is not a Sequential is one root unit by default.
  const auto not_sequential = accelerator.prepare(std::make_shared<NotSequential>());
  EXPECT_EQ(not_sequential->fully_sharded()->unit_names(), std::vector<std::string>{""});
  // A model never loaded: named before the move to the device would fail on it.
  message = acc::testing::error_of([&] { (void)accelerator.prepare(acc::init_empty_weights(make_net)); });
  EXPECT_NE(message.find("Accelerator::prepare: on rank 0 of its group, 0.weight is on the meta device"),
            std::string::npos)
      << message;
  // An optimizer prepared before its model has no shards to step.
  auto net = make_net();
  torch::optim::Adam adam(net->parameters());
  acc::Accelerator other(options("FULL_SHARD"));
  message = acc::testing::error_of([&] { (void)other.prepare(adam); });
  EXPECT_NE(message.find("before its optimizer"), std::string::npos) << message;
  // LocalSGD has no parameters to average.
  auto model = other.prepare(net);
  message = acc::testing::error_of([&] { acc::LocalSGD local(other, *model, 2); });
  EXPECT_NE(message.find("sharded"), std::string::npos) << message;
  // A module whose sharded model is gone holds no values (on one rank its
  // one shard was its storage all along, and it still is).
  other.free_memory();
  model = {};
  if (world_size() > 1) {
    acc::Accelerator third(options("NO_SHARD"));
    message = acc::testing::error_of([&] { (void)third.prepare(net); });
    EXPECT_NE(message.find("holds no memory"), std::string::npos) << message;
  }
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
