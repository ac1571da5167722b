#include "workloads.hpp"

#include <stdexcept>
#include <unordered_set>

#include "gpt_model.hpp"

namespace bench {

Mlp::Mlp() {
  fc1 = register_module("fc1", torch::nn::Linear(784, 1024));
  fc2 = register_module("fc2", torch::nn::Linear(1024, 1024));
  fc3 = register_module("fc3", torch::nn::Linear(1024, 10));
}

torch::Tensor Mlp::forward(const torch::Tensor& x) {
  return fc3->forward(torch::relu(fc2->forward(torch::relu(fc1->forward(x)))));
}

Cnn::Cnn() {
  conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3)));
  conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3)));
  fc1 = register_module("fc1", torch::nn::Linear(9216, 128));
  fc2 = register_module("fc2", torch::nn::Linear(128, 10));
}

torch::Tensor Cnn::forward(const torch::Tensor& x) {
  auto h = torch::relu(conv1->forward(x));
  h = torch::relu(conv2->forward(h));
  h = torch::max_pool2d(h, 2).flatten(1);
  return fc2->forward(torch::relu(fc1->forward(h)));
}

namespace {

// GPT's size for two cores: the d = 256, 4 blocks, sequence 128, vocabulary 8 k.
const gpt::GptConfig kGpt{.vocab = 8192, .sequence = 128, .d_model = 256, .heads = 4, .layers = 4};

// Each tensor once: the tied head's weight is the embedding's.
std::vector<torch::Tensor> distinct(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> out;
  std::unordered_set<const void*> seen;
  for (const auto& p : parameters) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) out.push_back(p);
  }
  return out;
}

}  // namespace

Workload make_workload(const std::string& name, int64_t batch, uint64_t seed) {
  constexpr int kBatches = 4;
  Workload w;
  w.name = name;
  w.loss = [](const torch::Tensor& out, const torch::Tensor& target) {
    return torch::nn::functional::cross_entropy(out, target);
  };
  torch::manual_seed(1);  // same initial model everywhere (the wrapper broadcasts anyway)
  if (name == "GPT") {
    auto m = std::make_shared<gpt::GptImpl>(kGpt);
    w.model = m;
    w.forward = [m](const torch::Tensor& x) { return m->forward(x); };
    w.loss = [](const torch::Tensor& logits, const torch::Tensor& target) {
      return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat),
                                                  target.reshape({-1}));
    };
    w.make_optimizer = [m] {
      return std::make_unique<torch::optim::AdamW>(distinct(m->parameters()), torch::optim::AdamWOptions(1e-3));
    };
    torch::manual_seed(seed);
    for (int i = 0; i < kBatches; ++i) {
      w.inputs.push_back(torch::randint(0, kGpt.vocab, {batch, kGpt.sequence}, torch::kLong));
      w.targets.push_back(torch::randint(0, kGpt.vocab, {batch, kGpt.sequence}, torch::kLong));
    }
    return w;
  }
  if (name == "W1") {
    auto m = std::make_shared<Mlp>();
    w.model = m;
    w.forward = [m](const torch::Tensor& x) { return m->forward(x); };
  } else if (name == "W2") {
    auto m = std::make_shared<Cnn>();
    w.model = m;
    w.forward = [m](const torch::Tensor& x) { return m->forward(x); };
  } else {
    throw std::invalid_argument("unknown workload '" + name + "' (W1, W2 or GPT)");
  }
  w.make_optimizer = [model = w.model] { return std::make_unique<torch::optim::SGD>(model->parameters(), 0.01); };
  torch::manual_seed(seed);
  for (int i = 0; i < kBatches; ++i) {
    w.inputs.push_back(name == "W1" ? torch::randn({batch, 784}) : torch::randn({batch, 1, 28, 28}));
    w.targets.push_back(torch::randint(0, 10, {batch}, torch::kLong));
  }
  return w;
}

}  // namespace bench
