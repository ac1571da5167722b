// Tied weights (a language model whose head shares the token embedding's
// weight, registered under both names as LibTorch users write it) through the
// Accelerator at 1 and 2 ranks. LibTorch's parameters() lists the shared
// tensor twice; the optimizer, the clipping, the gradient buckets and the
// checkpoints must all see it once:
//  - AdamW with clipping by norm under NO_SHARD and under SHARD_GRAD_OP ends
//    where a plain single-process loop over the distinct parameters ends (on
//    the whole global batch, so its gradient is the ranks' average, as DDP's),
//    with the same clip norms at every step; clipping by value too;
//  - the prepared optimizer holds each tensor once;
//  - a resumed run (save_state, load_state) ends where the uninterrupted one does;
//  - save_model writes the shared tensor once, under the name met first (the
//    one find_tied_parameters' group keeps), and load_checkpoint_in_model fills
//    both names of a fresh model from that file (or from one holding the other
//    name, or both), strictly.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "accelerate/checkpoint/safetensors.hpp"
#include "accelerate/modeling/load_checkpoint.hpp"
#include "accelerate/modeling/module_sizes.hpp"
#include "accelerate/training/accelerator.hpp"
#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"
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

constexpr std::int64_t kVocab = 13;
constexpr std::int64_t kDim = 6;
constexpr std::int64_t kPerRank = 4;  // tokens per rank per step
constexpr int kSteps = 6;
constexpr double kMaxNorm = 0.3;  // below the gradients' norm: clipping changes every step

// The head: a linear map by a weight registered here, which the model ties to
// the embedding's.
struct TiedHead : torch::nn::Module {
  explicit TiedHead(const torch::Tensor& tied) { weight = register_parameter("weight", tied); }
  torch::Tensor forward(const torch::Tensor& x) { return torch::linear(x, weight); }
  torch::Tensor weight;
};

// GPT-2's names: the embedding ("wte") comes first, the head ("lm_head") after
// it, so the name met first is not the alphabetically first.
struct TiedLm : torch::nn::Module {
  explicit TiedLm(std::uint64_t seed = 7) {
    torch::manual_seed(seed);
    wte = register_module("wte", torch::nn::Embedding(kVocab, kDim));
    mixer = register_module("mixer", torch::nn::Linear(kDim, kDim));
    lm_head = register_module("lm_head", std::make_shared<TiedHead>(wte->weight));
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    return lm_head->forward(torch::tanh(mixer->forward(wte->forward(tokens))));
  }
  torch::nn::Embedding wte{nullptr};
  torch::nn::Linear mixer{nullptr};
  std::shared_ptr<TiedHead> lm_head;
};

// Step i's global batch (every rank's tokens, rank by rank) and its targets.
std::pair<torch::Tensor, torch::Tensor> global_batch(int i) {
  torch::manual_seed(500 + i);
  const auto tokens = torch::randint(kVocab, {kPerRank * world_size()}, torch::kLong);
  const auto targets = torch::randint(kVocab, {kPerRank * world_size()}, torch::kLong);
  return {tokens, targets};
}

std::pair<torch::Tensor, torch::Tensor> local_batch(int i) {
  const auto [tokens, targets] = global_batch(i);
  return {tokens.narrow(0, kPerRank * world_rank(), kPerRank), targets.narrow(0, kPerRank * world_rank(), kPerRank)};
}

torch::optim::AdamWOptions adamw_options() { return torch::optim::AdamWOptions(0.05).weight_decay(0.1); }

enum class Clip { Norm, Value };

struct TrainingRun {
  std::vector<double> losses;             // the global batch's mean loss, per step
  std::vector<double> norms;              // clip_grad_norm_'s results
  std::vector<torch::Tensor> parameters;  // wte.weight, mixer.weight, mixer.bias
};

std::vector<torch::Tensor> distinct_parameters(const TiedLm& net) {
  return {net.wte->weight.detach().clone(), net.mixer->weight.detach().clone(), net.mixer->bias.detach().clone()};
}

// The hand-correct run: one process, the whole global batch, AdamW over the
// distinct tensors, clipping over them.
TrainingRun reference(Clip clip) {
  TiedLm net;
  const std::vector<torch::Tensor> distinct{net.wte->weight, net.mixer->weight, net.mixer->bias};
  torch::optim::AdamW adamw(distinct, adamw_options());
  TrainingRun run;
  for (int i = 0; i < kSteps; ++i) {
    const auto [tokens, targets] = global_batch(i);
    adamw.zero_grad();
    const auto loss = torch::nn::functional::cross_entropy(net.forward(tokens), targets);
    loss.backward();
    run.losses.push_back(loss.item<double>());
    if (clip == Clip::Norm) {
      run.norms.push_back(torch::nn::utils::clip_grad_norm_(distinct, kMaxNorm));
    } else {
      torch::nn::utils::clip_grad_value_(distinct, 0.02);
    }
    adamw.step();
  }
  run.parameters = distinct_parameters(net);
  return run;
}

acc::AcceleratorOptions options_for(const std::string& strategy) {
  acc::AcceleratorOptions options;
  options.fsdp_plugin = acc::FullyShardedDataParallelPlugin{.sharding_strategy = strategy};
  options.ddp_kwargs.bucket_cap_mb = 160.0 / (1024 * 1024);  // 40 floats: several buckets
  return options;
}

// Steps [from, to) through the Accelerator, as a user writes it: the optimizer
// over net->parameters() (the tied tensor listed twice), clipping over them too.
TrainingRun accelerated(const std::string& strategy, Clip clip, int from = 0, int to = kSteps,
                        const std::optional<fs::path>& save_to = std::nullopt,
                        const std::optional<fs::path>& resume_from = std::nullopt) {
  acc::Accelerator accelerator(options_for(strategy));
  auto net = std::make_shared<TiedLm>();
  EXPECT_EQ(net->parameters().size(), 4U);  // LibTorch lists the tie under both names
  torch::optim::AdamW adamw(net->parameters(), adamw_options());
  auto [model, optimizer] = accelerator.prepare(net, adamw);
  if (strategy == "NO_SHARD") {
    // Each tensor once in the optimizer, whatever the user listed.
    EXPECT_EQ(adamw.param_groups().front().params().size(), 3U);
    EXPECT_EQ(model->parameter_names().size(), 3U);
  }
  if (resume_from) accelerator.load_state(*resume_from);
  TrainingRun run;
  for (int i = from; i < to; ++i) {
    const auto [tokens, targets] = local_batch(i);
    optimizer->zero_grad();
    const auto loss = torch::nn::functional::cross_entropy(model(tokens), targets);
    accelerator.backward(loss);
    run.losses.push_back(accelerator.reduce(loss.detach(), "mean").item<double>());
    if (clip == Clip::Norm) {
      const auto norm = accelerator.clip_grad_norm_(net->parameters(), kMaxNorm);
      EXPECT_TRUE(norm.has_value());
      run.norms.push_back(norm.value_or(-1.0));
    } else {
      accelerator.clip_grad_value_(net->parameters(), 0.02);
    }
    optimizer->step();
  }
  EXPECT_TRUE(net->lm_head->weight.is_same(net->wte->weight));  // still one tensor
  if (save_to) accelerator.save_state(*save_to);
  run.parameters = distinct_parameters(*net);
  return run;
}

void expect_same_run(const TrainingRun& actual, const TrainingRun& expected) {
  ASSERT_EQ(actual.losses.size(), expected.losses.size());
  for (std::size_t i = 0; i < expected.losses.size(); ++i) {
    EXPECT_NEAR(actual.losses[i], expected.losses[i], 1e-5) << "the loss of step " << i;
  }
  ASSERT_EQ(actual.norms.size(), expected.norms.size());
  for (std::size_t i = 0; i < expected.norms.size(); ++i) {
    EXPECT_NEAR(actual.norms[i], expected.norms[i], 1e-5) << "the clip norm of step " << i;
  }
  const char* names[] = {"wte.weight", "mixer.weight", "mixer.bias"};
  ASSERT_EQ(actual.parameters.size(), expected.parameters.size());
  for (std::size_t p = 0; p < expected.parameters.size(); ++p) {
    EXPECT_TRUE(torch::allclose(actual.parameters[p], expected.parameters[p], 1e-4, 1e-5))
        << names[p] << " differs by " << (actual.parameters[p] - expected.parameters[p]).abs().max().item<double>();
  }
}

class TiedWeights : public acc::testing::DefaultDeviceTest {};

TEST_F(TiedWeights, AdamWWithClippingStepsTheTiedTensorOnceUnderEveryStrategy) {
  for (const Clip clip : {Clip::Norm, Clip::Value}) {
    SCOPED_TRACE(clip == Clip::Norm ? "clip_grad_norm_" : "clip_grad_value_");
    const TrainingRun expected = reference(clip);
    for (const std::string strategy : {"NO_SHARD", "SHARD_GRAD_OP"}) {
      SCOPED_TRACE(strategy);
      const TrainingRun actual = accelerated(strategy, clip);
      if (clip == Clip::Norm && world_rank() == 0) {
        std::printf("%s: final loss %.4f (the reference: %.4f)\n", strategy.c_str(), actual.losses.back(),
                    expected.losses.back());
      }
      expect_same_run(actual, expected);
    }
  }
}

TEST_F(TiedWeights, AResumedRunEndsWhereTheUninterruptedOneEnds) {
  const fs::path dir = acc::testing::shared_temp_directory("tied_weights_resume");
  for (const std::string strategy : {"NO_SHARD", "SHARD_GRAD_OP"}) {
    SCOPED_TRACE(strategy);
    const TrainingRun whole = accelerated(strategy, Clip::Norm);
    const fs::path saved = dir / strategy;
    (void)accelerated(strategy, Clip::Norm, 0, 3, saved);
    const TrainingRun resumed = accelerated(strategy, Clip::Norm, 3, kSteps, std::nullopt, saved);
    ASSERT_EQ(resumed.parameters.size(), whole.parameters.size());
    for (std::size_t p = 0; p < whole.parameters.size(); ++p) {
      EXPECT_TRUE(torch::equal(resumed.parameters[p], whole.parameters[p])) << "parameter " << p;
    }
  }
  acc::testing::remove_shared_directory(dir);
}

std::set<std::string> names_in(const fs::path& file) {
  std::set<std::string> names;
  for (const auto& [name, tensor] : acc::checkpoint::load_safetensors(file)) names.insert(name);
  return names;
}

TEST_F(TiedWeights, SaveModelWritesTheSharedTensorOnceAndALoadTiesItAgain) {
  const fs::path dir = acc::testing::shared_temp_directory("tied_weights_save_model");
  acc::Accelerator accelerator;
  auto net = std::make_shared<TiedLm>();
  torch::optim::AdamW adamw(net->parameters(), adamw_options());
  auto [model, optimizer] = accelerator.prepare(net, adamw);
  accelerator.save_model(*model, dir / "model");
  accelerator.wait_for_everyone();
  const fs::path file = dir / "model" / "model.safetensors";

  // One name per tensor: the one met first, as transformers keeps GPT-2's
  // transformer.wte.weight and drops lm_head.weight.
  EXPECT_EQ(names_in(file), (std::set<std::string>{"wte.weight", "mixer.weight", "mixer.bias"}));
  // The names find_tied_parameters groups are those save_model kept or dropped:
  // of each group exactly one name is in the file.
  const auto tied = acc::find_tied_parameters(*net);
  ASSERT_EQ(tied, (std::vector<std::vector<std::string>>{{"lm_head.weight", "wte.weight"}}));
  for (const auto& group : tied) {
    std::size_t kept = 0;
    for (const std::string& name : group) kept += names_in(file).count(name);
    EXPECT_EQ(kept, 1U);
  }

  // A fresh model, other values, loaded strictly: both names see the file's tensor.
  const auto loads_into_fresh_model = [&](const fs::path& from) {
    auto fresh = std::make_shared<TiedLm>(/*seed=*/99);
    ASSERT_FALSE(torch::equal(fresh->wte->weight, net->wte->weight));
    acc::LoadCheckpointOptions strict;
    strict.strict = true;
    acc::checkpoint::KeyReport report;
    try {
      report = acc::load_checkpoint_in_model(*fresh, from, strict);
    } catch (const std::exception& error) {
      ADD_FAILURE() << error.what();
      return;
    }
    EXPECT_TRUE(report.empty()) << report.to_string();
    EXPECT_TRUE(fresh->lm_head->weight.is_same(fresh->wte->weight));
    EXPECT_TRUE(torch::equal(fresh->wte->weight, net->wte->weight));
    EXPECT_TRUE(torch::equal(fresh->lm_head->weight, net->wte->weight));
    EXPECT_TRUE(torch::equal(fresh->mixer->weight, net->mixer->weight));
  };
  {
    SCOPED_TRACE("save_model's file");
    loads_into_fresh_model(file);
  }
  // Files that keep the other name (safetensors' own save_model keeps the
  // alphabetically first), or every name (written before this was fixed).
  const auto weight = net->wte->weight.detach();
  const std::vector<std::pair<std::string, torch::Tensor>> mixer{{"mixer.weight", net->mixer->weight.detach()},
                                                                 {"mixer.bias", net->mixer->bias.detach()}};
  if (world_rank() == 0) {
    auto other = mixer;
    other.emplace_back("lm_head.weight", weight);
    acc::checkpoint::save_safetensors(other, dir / "other_name.safetensors");
    auto both = mixer;
    both.emplace_back("wte.weight", weight);
    both.emplace_back("lm_head.weight", weight.clone());
    acc::checkpoint::save_safetensors(both, dir / "both_names.safetensors");
  }
  accelerator.wait_for_everyone();
  {
    SCOPED_TRACE("the other name");
    loads_into_fresh_model(dir / "other_name.safetensors");
  }
  {
    SCOPED_TRACE("both names");
    loads_into_fresh_model(dir / "both_names.safetensors");
  }
  // A file without any of the tie's names still reports the one name missing.
  auto fresh = std::make_shared<TiedLm>(/*seed=*/99);
  if (world_rank() == 0) acc::checkpoint::save_safetensors(mixer, dir / "untied.safetensors");
  accelerator.wait_for_everyone();
  const auto report = acc::load_checkpoint_in_model(*fresh, dir / "untied.safetensors");
  EXPECT_EQ(report.missing, std::vector<std::string>{"wte.weight"});
  EXPECT_TRUE(report.unexpected.empty());
  acc::testing::remove_shared_directory(dir);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
