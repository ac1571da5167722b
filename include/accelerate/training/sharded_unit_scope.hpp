// ShardedUnitScope: where a FULL_SHARD unit's forward begins and ends, for a
// unit the library does not call itself (any module but a child of a
// torch::nn::Sequential). Two lines in the unit's class:
//
//   torch::Tensor BlockImpl::forward(torch::Tensor x, const torch::Tensor& mask) {
//     accelerate::ShardedUnitScope unit(*this);  // gathers this unit's parameters
//     x = x + attn->forward(ln_1->forward(x), mask);
//     x = x + mlp->forward(ln_2->forward(x));
//     return unit.output(x);                     // gathers them again before its backward
//   }
//
// With activation checkpointing (FullShardOptions::activation_checkpointing,
// the FSDP plugin's activation_checkpointing) a third line runs the body
// checkpointed (accelerate/training/activation_checkpoint.hpp): its
// activations are recomputed in the unit's backward, while the unit is whole
// again, instead of kept from forward to backward:
//
//   torch::Tensor BlockImpl::forward(torch::Tensor x, const torch::Tensor& mask) {
//     accelerate::ShardedUnitScope unit(*this);
//     x = unit.checkpoint([this, mask](const torch::Tensor& h) {
//       const torch::Tensor a = h + attn->forward(ln_1->forward(h), mask);
//       return a + mlp->forward(ln_2->forward(a));
//     }, x);
//     return unit.output(x);
//   }
//
// Without checkpointing (the default, or a module that is not a unit) the
// body just runs. The body runs again in backward: it captures by value.
//
// The scope's end frees the whole parameters again. output() marks the
// unit's outputs: when backward reaches them the unit is gathered for its
// own backward (FSDP2's pre-backward hook on a unit's outputs); tensors that
// need no gradient pass through untouched. For a module that is not a unit
// of a FullyShardedModel (unsharded training, evaluation on one process)
// both are no-ops, so the model runs the same everywhere.
//
// Every unit's forward must run inside its scope, and every output that
// carries a gradient through output(): a FullyShardedModel checks both in
// the first forward (which holds every unit whole) and in each forward after
// it, and throws ConfigError naming the unit rather than reading freed
// memory (docs/sharding.md).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "accelerate/training/activation_checkpoint.hpp"

namespace torch::nn {
class Module;
}

namespace accelerate {

class FullyShardedModel;

class ShardedUnitScope {
 public:
  explicit ShardedUnitScope(const torch::nn::Module& unit);
  ~ShardedUnitScope();
  ShardedUnitScope(const ShardedUnitScope&) = delete;
  ShardedUnitScope& operator=(const ShardedUnitScope&) = delete;

  /// The unit's output, through which its backward gathers it again.
  [[nodiscard]] at::Tensor output(const at::Tensor& tensor);
  /// Several outputs (a list, or a tuple of tensors).
  [[nodiscard]] std::vector<at::Tensor> output(std::vector<at::Tensor> tensors);
  template <class... Tensors>
  [[nodiscard]] std::tuple<Tensors...> output(std::tuple<Tensors...> tensors) {
    return std::apply([this](auto&... each) { return std::tuple<Tensors...>(output(each)...); }, tensors);
  }

  /// `fn(inputs...)`, checkpointed (accelerate::activation_checkpoint over the unit)
  /// when the unit's model asks for activation checkpointing; else just run.
  /// ConfigError if the unit holds other units (checkpoint those instead).
  template <class Fn, class... Tensors>
  auto checkpoint(Fn&& fn, const Tensors&... inputs) {
    using Result = std::remove_cvref_t<std::invoke_result_t<Fn&, const Tensors&...>>;
    if (checkpointed()) return accelerate::activation_checkpoint(*module_, std::forward<Fn>(fn), inputs...);
    return Result(std::invoke(fn, inputs...));
  }

  /// Whether the module is a unit of a live FullyShardedModel.
  [[nodiscard]] bool sharded() const noexcept { return model_ != nullptr; }

 private:
  [[nodiscard]] bool checkpointed() const;

  const torch::nn::Module* module_ = nullptr;
  FullyShardedModel* model_ = nullptr;
  std::size_t unit_ = 0;
};

}  // namespace accelerate
