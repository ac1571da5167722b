// A three-layer MLP of odd sizes (7 -> 13 -> 5 -> 3), so that its parameters
// straddle the buckets and shards of a sharded optimizer. Seeded, so that
// every rank builds the same model.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace accelerate::testing {

struct OddSizedNet : torch::nn::Module {
  explicit OddSizedNet(std::int64_t seed) {
    torch::manual_seed(seed);
    fc1 = register_module("fc1", torch::nn::Linear(7, 13));
    fc2 = register_module("fc2", torch::nn::Linear(13, 5));
    fc3 = register_module("fc3", torch::nn::Linear(5, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc3->forward(torch::tanh(fc2->forward(torch::tanh(fc1->forward(x)))));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};

}  // namespace accelerate::testing
