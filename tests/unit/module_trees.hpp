// The module trees that module_sizes_test checks by hand and that the
// cross-check against Hugging Face Accelerate builds again in Python
// (module_sizes_crosscheck.py, which must stay in step with this file).
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace accelerate::testing::trees {

// Linear, LayerNorm, a float buffer and an int64 buffer.
struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(std::int64_t width = 6) {
    proj = register_module("proj", torch::nn::Linear(width, width));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
    scale = register_buffer("scale", torch::ones({width}));
    positions = register_buffer("positions", torch::arange(8, torch::kLong));
  }
  torch::Tensor forward(const torch::Tensor& x) { return norm->forward(proj->forward(x)) * scale; }  // for Sequential
  torch::nn::Linear proj{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::Tensor scale, positions;
};
TORCH_MODULE(Block);

// A module that owns a parameter it is given: ties it to another module's.
struct HeadImpl : torch::nn::Module {
  explicit HeadImpl(const torch::Tensor& tied) { weight = register_parameter("weight", tied); }
  torch::Tensor weight;
};
TORCH_MODULE(Head);

// An embedding whose weight the head shares, and one block under two names.
struct TiedImpl : torch::nn::Module {
  TiedImpl() {
    embed = register_module("embed", torch::nn::Embedding(11, 6));
    block = register_module("block", Block());
    register_module("block_again", block);
    head = register_module("head", Head(embed->weight));
  }
  torch::nn::Embedding embed{nullptr};
  Block block{nullptr};
  Head head{nullptr};
};
TORCH_MODULE(Tied);

// A language model's shape: embedding, a stack of blocks, a norm, and a head
// tied to the embedding (the first and the last layer share a weight).
struct LmImpl : torch::nn::Module {
  LmImpl() {
    embed = register_module("embed", torch::nn::Embedding(40, 8));
    layers = register_module("layers", torch::nn::Sequential(Block(8), Block(8), Block(8), Block(8)));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({8})));
    head = register_module("head", Head(embed->weight));
  }
  torch::nn::Embedding embed{nullptr};
  torch::nn::Sequential layers{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  Head head{nullptr};
};
TORCH_MODULE(Lm);

inline std::map<std::string, std::shared_ptr<torch::nn::Module>> all() {
  torch::nn::Sequential mlp(torch::nn::Linear(7, 13), torch::nn::ReLU(), torch::nn::Linear(13, 5), torch::nn::Tanh(),
                            torch::nn::Linear(5, 3));
  torch::nn::Sequential nested(Block(), Block(), torch::nn::LayerNorm(torch::nn::LayerNormOptions({6})));
  return {{"mlp", mlp.ptr()}, {"tied", Tied().ptr()}, {"nested", nested.ptr()}, {"lm", Lm().ptr()}};
}

}  // namespace accelerate::testing::trees
