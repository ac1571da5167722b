// The single-GPU workloads of bench_gpu_train, defined op for op like the
// models of accelerate_peer.py: W1 and W2 of bench/train, and T, a small
// pre-norm transformer (4 blocks, d = 256, 4 heads, sequence 128, vocabulary
// 1024) whose attention is one scaled_dot_product_attention call on both
// sides, so the two loops run the same kernels.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

namespace bench {

inline constexpr int64_t kTokens = 128;
inline constexpr int64_t kVocab = 1024;
inline constexpr int64_t kWidth = 256;
inline constexpr int64_t kHeads = 4;
inline constexpr int64_t kBlocks = 4;

struct Block : torch::nn::Module {
  Block();
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, up{nullptr}, down{nullptr};
};

struct TinyTransformer : torch::nn::Module {
  TinyTransformer();
  torch::Tensor forward(const torch::Tensor& tokens);  ///< [batch, kTokens] -> [batch * kTokens, kVocab]
  torch::nn::Embedding embed{nullptr};
  torch::Tensor position;
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};
};

/// One workload on `device`: the model, its forward, and a few synthetic
/// batches already on the device (cycled; no data movement is timed).
struct GpuWorkload {
  std::shared_ptr<torch::nn::Module> model;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  std::vector<torch::Tensor> inputs, targets;  ///< targets flattened to match forward's rows
};

/// "W1", "W2" or "T"; `batch` samples (sequences for T) per step.
GpuWorkload make_gpu_workload(const std::string& name, int64_t batch, const torch::Device& device);

}  // namespace bench
