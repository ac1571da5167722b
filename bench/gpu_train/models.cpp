#include "models.hpp"


#include "workloads.hpp"

namespace bench {

Block::Block() {
  ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kWidth})));
  qkv = register_module("qkv", torch::nn::Linear(kWidth, 3 * kWidth));
  proj = register_module("proj", torch::nn::Linear(kWidth, kWidth));
  ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kWidth})));
  up = register_module("up", torch::nn::Linear(kWidth, 4 * kWidth));
  down = register_module("down", torch::nn::Linear(4 * kWidth, kWidth));
}

torch::Tensor Block::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0);
  const int64_t seq = x.size(1);
  // [batch, seq, 3, heads, head_dim] -> 3 x [batch, heads, seq, head_dim]
  const auto parts = qkv->forward(ln1->forward(x)).view({batch, seq, 3, kHeads, kWidth / kHeads}).permute({2, 0, 3, 1, 4});
#if TORCH_VERSION_MAJOR >= 2
  const auto attended = at::scaled_dot_product_attention(parts[0], parts[1], parts[2], {}, 0.0, /*is_causal=*/true);
#else
  // LibTorch 1.13 has no public fused attention: the same maths unfused.
  const auto scores = torch::matmul(parts[0], parts[1].transpose(-2, -1)) / std::sqrt(double(kWidth / kHeads));
  const auto mask = torch::ones({seq, seq}, x.options().dtype(torch::kBool)).triu(1);
  const auto attended = torch::matmul(torch::softmax(scores.masked_fill(mask, -INFINITY), -1), parts[2]);
#endif
  auto h = x + proj->forward(attended.transpose(1, 2).reshape({batch, seq, kWidth}));
  return h + down->forward(torch::gelu(up->forward(ln2->forward(h))));
}

TinyTransformer::TinyTransformer() {
  embed = register_module("embed", torch::nn::Embedding(kVocab, kWidth));
  position = register_parameter("position", torch::randn({kTokens, kWidth}) * 0.02);
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < kBlocks; ++i) blocks->push_back(std::make_shared<Block>());
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kWidth})));
  head = register_module("head", torch::nn::Linear(kWidth, kVocab));
}

torch::Tensor TinyTransformer::forward(const torch::Tensor& tokens) {
  auto h = embed->forward(tokens) + position;
  for (const auto& block : *blocks) h = block->as<Block>()->forward(h);
  return head->forward(norm->forward(h)).view({-1, kVocab});
}

GpuWorkload make_gpu_workload(const std::string& name, int64_t batch, const torch::Device& device) {
  constexpr int kBatches = 4;
  GpuWorkload w;
  if (name != "T") {
    // W1 and W2 are bench/train's workloads, their batches moved to the device.
    Workload cpu = make_workload(name, batch, /*seed=*/1000);
    w.model = cpu.model;
    w.forward = cpu.forward;
    for (auto& input : cpu.inputs) w.inputs.push_back(input.to(device));
    for (auto& target : cpu.targets) w.targets.push_back(target.to(device));
    return w;
  }
  torch::manual_seed(1);
  auto m = std::make_shared<TinyTransformer>();
  w.model = m;
  w.forward = [m](const torch::Tensor& x) { return m->forward(x); };
  torch::manual_seed(1000);
  for (int i = 0; i < kBatches; ++i) {
    w.inputs.push_back(torch::randint(0, kVocab, {batch, kTokens}, torch::kLong).to(device));
    w.targets.push_back(torch::randint(0, kVocab, {batch * kTokens}, torch::kLong).to(device));
  }
  return w;
}

}  // namespace bench
