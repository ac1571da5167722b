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
#include <tuple>
#include <utility>
#include <vector>

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

  /// Whether the module is a unit of a live FullyShardedModel.
  [[nodiscard]] bool sharded() const noexcept { return model_ != nullptr; }

 private:
  FullyShardedModel* model_ = nullptr;
  std::size_t unit_ = 0;
};

}  // namespace accelerate
