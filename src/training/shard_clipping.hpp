// Clipping a gradient that is cut into shards across the ranks of a group
// (ZeRO stages 2 and 3): the norm of the whole gradient from one all-reduce
// of the shards' partial sums (or maxima), then each shard scaled in place.
#pragma once

#include <ATen/Tensor.h>

#include <vector>

#include "accelerate/comm/process_group.hpp"

namespace accelerate::training_detail {

/// Clips the whole gradient, whose shards on this rank are `shard_grads`
/// (undefined or empty ones skipped; padding must hold zeros), to
/// `max_norm`, as torch::nn::utils::clip_grad_norm_ does; returns the norm
/// before clipping. Collective over `group`.
double clip_norm_of_shards(const std::vector<at::Tensor>& shard_grads, ProcessGroup& group, double max_norm,
                           double norm_type);

}  // namespace accelerate::training_detail
