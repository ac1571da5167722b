// The two training workloads of bench/train, identical in the C++ runs and
// in ddp_peer.py: W1, an MLP 784-1024-1024-10; W2, a small CNN on 1x28x28.
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
  std::string name;  ///< "W1" or "W2"
  std::shared_ptr<torch::nn::Module> model;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  std::vector<torch::Tensor> inputs;
  std::vector<torch::Tensor> targets;
};

/// "W1" or "W2"; `batch` rows per batch; `seed` makes ranks' data differ.
Workload make_workload(const std::string& name, int64_t batch, uint64_t seed);

}  // namespace bench
