// Tied weights listed once. A tie in LibTorch is one at::Tensor registered
// under two names (a head whose weight is the token embedding's): the same
// TensorImpl, which Module::parameters() lists once per name. Whatever steps,
// clips or reduces parameters takes each tensor once, at its first place.
// Tensors that merely share storage (two views of one buffer) are distinct
// autograd leaves with gradients of their own, not a tie, and stay.
// Shared by Accelerator (prepare, clipping), DistributedModel and ShardedOptimizer.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace accelerate::training_detail {

/// `tensors` with every tensor after its first listing left out (identity:
/// the TensorImpl), in their order.
std::vector<at::Tensor> distinct_tensors(const std::vector<at::Tensor>& tensors);

/// Removes, in place, every listing of a tensor after its first from each of
/// the optimizer's param groups, so that step() updates it once. The
/// optimizer's state is keyed by the tensor, so what it holds stays valid.
/// A tensor in two param groups is a ConfigError from `who`. Returns how many
/// listings were removed.
std::size_t deduplicate_param_groups(torch::optim::Optimizer& optimizer, const std::string& who);

}  // namespace accelerate::training_detail
