#include "accelerate/training_state/module_state.hpp"

#include <torch/nn/module.h>

namespace accelerate::checkpoint {

std::map<std::string, at::Tensor> module_state(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> tensors;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) tensors.emplace(item.key(), item.value());
  for (const auto& item : module.named_buffers(/*recurse=*/true)) tensors.emplace(item.key(), item.value());
  return tensors;
}

}  // namespace accelerate::checkpoint
