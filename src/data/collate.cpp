#include "accelerate/data/collate.hpp"

#include <torch/torch.h>

#include <cstddef>
#include <sstream>
#include <utility>

#include "accelerate/error.hpp"

namespace accelerate::detail {

namespace {

std::string describe(const torch::Tensor& tensor) {
  std::ostringstream text;
  text << tensor.sizes() << " " << tensor.scalar_type();
  return text.str();
}

// torch::stack's own message names neither the sample nor the field.
void check_same_layout(const std::vector<torch::data::Example<>>& examples) {
  const auto& first = examples.front();
  for (std::size_t i = 1; i < examples.size(); ++i) {
    const auto& example = examples[i];
    for (const auto& [field, mine, reference] :
         {std::tuple<const char*, const torch::Tensor&, const torch::Tensor&>{"data", example.data, first.data},
          {"target", example.target, first.target}}) {
      if (mine.sizes() != reference.sizes() || mine.scalar_type() != reference.scalar_type()) {
        loader_error("collate", std::string("example ") + std::to_string(i) + " of the batch has " + field + " " +
                                    describe(mine) + ", but example 0 has " + describe(reference) +
                                    ". A batch stacks its examples, so every sample's data (and target) must have "
                                    "the same shape and dtype; pad or resize the samples in the dataset's get().");
      }
    }
  }
}

}  // namespace

void loader_error(std::string_view component, const std::string& what) {
  throw ConfigError(where() + " " + std::string(component) + ": " + what);
}

torch::data::Example<> stack_examples(std::vector<torch::data::Example<>>& examples) {
  if (examples.empty()) loader_error("collate", "a batch needs at least one example.");
  std::vector<torch::Tensor> data;
  std::vector<torch::Tensor> targets;
  data.reserve(examples.size());
  targets.reserve(examples.size());
  for (auto& example : examples) {
    data.push_back(std::move(example.data));
    targets.push_back(std::move(example.target));
  }
  try {
    return {torch::stack(data), torch::stack(targets)};
  } catch (const c10::Error&) {
    // Checked only on failure: comparing every example's shape up front
    // costs as much as the rest of the loader's per-batch work.
    for (std::size_t i = 0; i < examples.size(); ++i) {
      examples[i].data = std::move(data[i]);
      examples[i].target = std::move(targets[i]);
    }
    check_same_layout(examples);
    throw;
  }
}

torch::data::Example<> place_batch(torch::data::Example<> batch, const torch::Device& device, bool non_blocking,
                                   bool pin_memory) {
  if (device.is_cpu()) return batch;
  auto move = [&](torch::Tensor& tensor) {
    if (!tensor.defined() || tensor.device() == device) return;
    // An asynchronous host-to-device copy is only asynchronous from pinned
    // memory; from pageable memory CUDA stages it synchronously.
    if (pin_memory && tensor.is_cpu() && !tensor.is_pinned()) tensor = tensor.pin_memory();
    tensor = tensor.to(device, non_blocking);
  };
  move(batch.data);
  move(batch.target);
  return batch;
}

}  // namespace accelerate::detail
