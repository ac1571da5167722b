#include "accelerate/training/sharded_unit_scope.hpp"

#include "accelerate/training/fully_sharded_model.hpp"

namespace accelerate {

// The lookup lives with FullyShardedModel's registry of its units.
ShardedUnitScope::ShardedUnitScope(const torch::nn::Module& unit) : module_(&unit) {
  const auto found = FullyShardedModel::unit_of(&unit);
  if (found.first == nullptr) return;
  found.first->enter_unit(found.second);
  model_ = found.first;
  unit_ = found.second;
}

ShardedUnitScope::~ShardedUnitScope() {
  if (model_ != nullptr) model_->leave_unit(unit_);
}

bool ShardedUnitScope::checkpointed() const { return model_ != nullptr && model_->checkpoints_unit(unit_); }

at::Tensor ShardedUnitScope::output(const at::Tensor& tensor) {
  return model_ != nullptr ? model_->unit_output(unit_, tensor) : tensor;
}

std::vector<at::Tensor> ShardedUnitScope::output(std::vector<at::Tensor> tensors) {
  for (at::Tensor& tensor : tensors) tensor = output(tensor);
  return tensors;
}

}  // namespace accelerate
