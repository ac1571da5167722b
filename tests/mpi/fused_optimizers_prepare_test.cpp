// The fused optimizers through Accelerator::prepare at 1 and 2 ranks: the
// same training loop with FusedAdamW (or FusedSGD) and with torch::optim's
// AdamW (SGD) gives the same parameters after every step, without sharding
// (DistributedModel's all-reduce writes into the flat gradient) and under
// SHARD_GRAD_OP (ShardedOptimizer re-points the param groups at its shards,
// which the fused step then steps); save_state/load_state resume a fused
// run where it stopped, and its checkpoint continues in torch::optim::AdamW.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/config.hpp"
#include "accelerate/training/accelerator.hpp"
#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"
#include "accelerate/training/fused_optimizers.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
namespace fs = std::filesystem;
namespace optim = torch::optim;
using acc::testing::world_rank;
using acc::testing::world_size;

constexpr std::int64_t kPerRank = 4;
constexpr int kSteps = 5;

struct Net : torch::nn::Module {
  Net() {
    torch::manual_seed(3);
    first = register_module("first", torch::nn::Linear(6, 8));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({8})));
    second = register_module("second", torch::nn::Linear(8, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return second->forward(norm->forward(torch::tanh(first->forward(x))));
  }
  torch::nn::Linear first{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear second{nullptr};
};

std::pair<torch::Tensor, torch::Tensor> local_batch(int step) {
  torch::manual_seed(700 + step);
  const auto x = torch::randn({kPerRank * world_size(), 6});
  const auto y = torch::randn({kPerRank * world_size(), 3});
  return {x.narrow(0, kPerRank * world_rank(), kPerRank), y.narrow(0, kPerRank * world_rank(), kPerRank)};
}

using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<torch::Tensor>)>;

Make fused_adamw() {
  return [](std::vector<torch::Tensor> p) {
    return std::make_unique<acc::FusedAdamW>(std::move(p), optim::AdamWOptions(0.02).weight_decay(0.1));
  };
}
Make torch_adamw() {
  return [](std::vector<torch::Tensor> p) {
    return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions(0.02).weight_decay(0.1));
  };
}
Make fused_sgd() {
  return [](std::vector<torch::Tensor> p) {
    return std::make_unique<acc::FusedSGD>(std::move(p), optim::SGDOptions(0.05).momentum(0.9).weight_decay(0.01));
  };
}
Make torch_sgd() {
  return [](std::vector<torch::Tensor> p) {
    return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.05).momentum(0.9).weight_decay(0.01));
  };
}

acc::AcceleratorOptions options_for(const std::string& strategy) {
  acc::AcceleratorOptions options;
  options.fsdp_plugin = acc::FullyShardedDataParallelPlugin{.sharding_strategy = strategy};
  options.ddp_kwargs.bucket_cap_mb = 200.0 / (1024 * 1024);  // 50 floats: several buckets
  return options;
}

// The parameters after each of steps [from, to).
std::vector<std::vector<torch::Tensor>> train(const Make& make, const std::string& strategy, int from = 0,
                                              int to = kSteps, const std::optional<fs::path>& save_to = std::nullopt,
                                              const std::optional<fs::path>& resume_from = std::nullopt) {
  acc::Accelerator accelerator(options_for(strategy));
  auto net = std::make_shared<Net>();
  auto built = make(net->parameters());
  auto [model, optimizer] = accelerator.prepare(net, *built);
  if (resume_from) accelerator.load_state(*resume_from);
  std::vector<std::vector<torch::Tensor>> after;
  for (int step = from; step < to; ++step) {
    const auto [x, y] = local_batch(step);
    optimizer->zero_grad();
    accelerator.backward(torch::mse_loss(model(x), y));
    optimizer->step();
    after.emplace_back();
    for (const auto& p : net->parameters()) after.back().push_back(p.detach().clone());
  }
  if (save_to) accelerator.save_state(*save_to);
  return after;
}

void expect_close(const std::vector<std::vector<torch::Tensor>>& actual,
                  const std::vector<std::vector<torch::Tensor>>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t s = 0; s < expected.size(); ++s) {
    ASSERT_EQ(actual[s].size(), expected[s].size());
    for (std::size_t p = 0; p < expected[s].size(); ++p) {
      EXPECT_TRUE(torch::allclose(actual[s][p], expected[s][p], 1e-5, 1e-6))
          << "step " << s << ", parameter " << p << " differs by "
          << (actual[s][p] - expected[s][p]).abs().max().item<double>();
    }
  }
}

TEST(FusedOptimizersPrepared, AdamWAndSgdStepAsTorchOptimUnderPrepare) {
  for (const std::string strategy : {"NO_SHARD", "SHARD_GRAD_OP"}) {
    SCOPED_TRACE(strategy);
    {
      SCOPED_TRACE("AdamW");
      expect_close(train(fused_adamw(), strategy), train(torch_adamw(), strategy));
    }
    {
      SCOPED_TRACE("SGD with momentum");
      expect_close(train(fused_sgd(), strategy), train(torch_sgd(), strategy));
    }
  }
}

#if ACCELERATE_HAVE_HDF5
TEST(FusedOptimizersPrepared, SaveStateAndLoadStateResumeAFusedRun) {
  const fs::path dir = acc::testing::shared_temp_directory("fused_optimizers_resume");
  const auto whole = train(fused_adamw(), "NO_SHARD");
  (void)train(fused_adamw(), "NO_SHARD", 0, 2, dir / "fused");
  const auto resumed = train(fused_adamw(), "NO_SHARD", 2, kSteps, std::nullopt, dir / "fused");
  const std::vector<std::vector<torch::Tensor>> tail(whole.begin() + 2, whole.end());
  ASSERT_EQ(resumed.size(), tail.size());
  for (std::size_t s = 0; s < tail.size(); ++s) {
    for (std::size_t p = 0; p < tail[s].size(); ++p) {
      EXPECT_TRUE(torch::equal(resumed[s][p], tail[s][p])) << "step " << s + 2 << ", parameter " << p;
    }
  }
  // The same checkpoint continued by torch::optim::AdamW.
  expect_close(train(torch_adamw(), "NO_SHARD", 2, kSteps, std::nullopt, dir / "fused"), tail);
  acc::testing::remove_shared_directory(dir);
}
#endif

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
