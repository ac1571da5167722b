// The training workloads of bench/train, identical in the C++ runs and in
// ddp_peer.py: W1, an MLP 784-1024-1024-10; W2, a small CNN on 1x28x28 (both
// with SGD); GPT, the transformer of jobs/gpt (d = 256, 4 blocks of 4 heads,
// sequence 128, vocabulary 8192, a head tied to the embedding) with AdamW.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace bench {

struct Mlp : torch::nn::Module {
  Mlp();
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};

struct Cnn : torch::nn::Module {
  Cnn();
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

/// A workload: its model, and a few synthetic batches generated in-process
/// (cycled, so no data generation runs inside the timed loop).
struct Workload {
  std::string name;  ///< "W1", "W2" or "GPT"
  std::shared_ptr<torch::nn::Module> model;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  /// The loss of a forward's output against a target (cross-entropy, over every token for GPT).
  std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> loss;
  /// The workload's optimizer over the model's distinct parameters (SGD 0.01; AdamW 1e-3 for GPT).
  std::function<std::unique_ptr<torch::optim::Optimizer>()> make_optimizer;
  std::vector<torch::Tensor> inputs;
  std::vector<torch::Tensor> targets;
};

/// "W1", "W2" or "GPT"; `batch` rows per batch; `seed` makes ranks' data differ.
Workload make_workload(const std::string& name, int64_t batch, uint64_t seed);

}  // namespace bench
