// A small GPT written the way LibTorch users write one: custom modules, a
// ModuleList of blocks, each with its own causal self-attention and MLP, a
// final LayerNorm and a head whose weight *is* the token embedding's (tied,
// registered under both names, as GPT-2 does). Nothing in it knows about
// the Accelerator; the ShardedUnitScope lines in BlockImpl::forward let
// FULL_SHARD gather each block only around its own forward and backward, and
// recompute its activations in backward with activation checkpointing (they
// do nothing when the block is not sharded).
#pragma once

#include <torch/torch.h>

#include <accelerate/training/sharded_unit_scope.hpp>

#include <cmath>
#include <cstdint>

namespace gpt {

struct GptConfig {
  int64_t vocab = 512;
  int64_t sequence = 64;  // the longest sequence (position embeddings)
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t layers = 4;
};

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GptConfig& config)
      : heads_(config.heads),
        qkv_(register_module("qkv", torch::nn::Linear(config.d_model, 3 * config.d_model))),
        proj_(register_module("proj", torch::nn::Linear(config.d_model, config.d_model))) {}

  // x: [batch, time, d]; padding: [batch, time], 1 for tokens, 0 for padding (may be undefined).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& padding) {
    const int64_t batch = x.size(0);
    const int64_t time = x.size(1);
    const int64_t d = x.size(2);
    const auto split = qkv_(x).split(d, /*dim=*/2);
    const auto heads = [&](const torch::Tensor& t) {
      return t.view({batch, time, heads_, d / heads_}).transpose(1, 2);
    };
    const torch::Tensor q = heads(split[0]);
    const torch::Tensor k = heads(split[1]);
    const torch::Tensor v = heads(split[2]);
    torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d / heads_));
    // Causal: a token attends to itself and the tokens before it; never to padding.
    torch::Tensor blocked = torch::ones({time, time}, x.options().dtype(torch::kBool)).triu(1);
    if (padding.defined()) blocked = blocked.logical_or(padding.eq(0).view({batch, 1, 1, time}));
    scores = scores.masked_fill(blocked, -1e4);
    const torch::Tensor attended = torch::matmul(torch::softmax(scores, -1), v);
    return proj_(attended.transpose(1, 2).contiguous().view({batch, time, d}));
  }

 private:
  int64_t heads_;
  torch::nn::Linear qkv_, proj_;
};
TORCH_MODULE(CausalSelfAttention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const GptConfig& config)
      : fc_(register_module("fc", torch::nn::Linear(config.d_model, 4 * config.d_model))),
        proj_(register_module("proj", torch::nn::Linear(4 * config.d_model, config.d_model))) {}
  torch::Tensor forward(const torch::Tensor& x) { return proj_(torch::gelu(fc_(x))); }

 private:
  torch::nn::Linear fc_, proj_;
};
TORCH_MODULE(Mlp);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const GptConfig& config)
      : ln1_(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model})))),
        attn_(register_module("attn", CausalSelfAttention(config))),
        ln2_(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model})))),
        mlp_(register_module("mlp", Mlp(config))) {}

  torch::Tensor forward(torch::Tensor x, const torch::Tensor& padding) {
    accelerate::ShardedUnitScope unit(*this);
    // Recomputed in the block's backward under activation checkpointing (else
    // just run); it runs after this forward returned, so it captures by value.
    x = unit.checkpoint(
        [this, padding](const torch::Tensor& h) {
          const torch::Tensor a = h + attn_(ln1_(h), padding);
          return a + mlp_(ln2_(a));
        },
        x);
    return unit.output(x);
  }

 private:
  torch::nn::LayerNorm ln1_;
  CausalSelfAttention attn_;
  torch::nn::LayerNorm ln2_;
  Mlp mlp_;
};
TORCH_MODULE(Block);

// The head: a linear map by a weight it shares with the token embedding.
class TiedHeadImpl : public torch::nn::Module {
 public:
  explicit TiedHeadImpl(const torch::Tensor& embedding_weight) {
    weight = register_parameter("weight", embedding_weight);
  }
  torch::Tensor forward(const torch::Tensor& x) { return torch::linear(x, weight); }
  torch::Tensor weight;
};
TORCH_MODULE(TiedHead);

class GptImpl : public torch::nn::Module {
 public:
  explicit GptImpl(const GptConfig& config)
      : config_(config),
        wte(register_module("wte", torch::nn::Embedding(config.vocab, config.d_model))),
        wpe(register_module("wpe", torch::nn::Embedding(config.sequence, config.d_model))),
        blocks(register_module("blocks", torch::nn::ModuleList())),
        ln_f(register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model})))) {
    for (int64_t i = 0; i < config.layers; ++i) blocks->push_back(Block(config));
    lm_head = register_module("lm_head", TiedHead(wte->weight));
    // GPT-2's initialisation: small normal weights, zero biases.
    torch::NoGradGuard no_grad;
    for (auto& parameter : named_parameters()) {
      if (parameter.key().find("bias") != std::string::npos) {
        parameter.value().zero_();
      } else if (parameter.value().dim() >= 2) {
        parameter.value().normal_(0.0, 0.02);
      }
    }
  }

  // input_ids: [batch, time] int64; attention_mask: [batch, time] (1 token, 0 padding) or undefined.
  // Returns the logits [batch, time, vocab].
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {}) {
    const torch::Tensor positions = torch::arange(input_ids.size(1), input_ids.options());
    torch::Tensor x = wte(input_ids) + wpe(positions);
    for (const auto& block : *blocks) x = block->as<Block>()->forward(x, attention_mask);
    return lm_head(ln_f(x));
  }

  const GptConfig& config() const { return config_; }

 private:
  GptConfig config_;

 public:
  torch::nn::Embedding wte, wpe;
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm ln_f;
  TiedHead lm_head{nullptr};
};
TORCH_MODULE(Gpt);

}  // namespace gpt
