// Tensors without values: a model built by init_empty_weights (every tensor on
// the meta device) and not loaded cannot be trained, broadcast or sharded.
// The check is agreed over the ranks before the first collective that would
// read the values, so that a rank left empty (say, one that did not load the
// checkpoint the others loaded) makes every rank raise instead of a hang.
// Shared by Accelerator::prepare, DistributedModel, FullyShardedModel and
// ShardedOptimizer.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "accelerate/comm/process_group.hpp"

namespace accelerate::training_detail {

/// The module's parameters, then its buffers, by qualified name.
std::vector<std::pair<std::string, at::Tensor>> named_module_tensors(const torch::nn::Module& module);

/// The name of the first of `tensors` on the meta device, or "".
std::string first_meta_tensor(const std::vector<std::pair<std::string, at::Tensor>>& tensors);

/// The problem a rank reports for its tensor `name` on the meta device,
/// before `action` ("sharding it", ...), for an error that names the rank.
std::string meta_tensor_problem(const std::string& name, const std::string& action);

/// Throws ConfigError from `who` on every rank of each of `groups` (null
/// entries skipped) when any rank's `tensors` include one on the meta device,
/// naming the rank and the tensor. Collective over each group in turn.
void refuse_meta_tensors(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                         std::initializer_list<ProcessGroup*> groups, const std::string& who,
                         const std::string& action);

}  // namespace accelerate::training_detail
