// Optimizer state in a checkpoint: every per-parameter tensor as a dataset
// <group>/state/<p>/<name> (p = the parameter's position across the param
// groups, as in PyTorch's state_dict), scalar per-parameter state and each
// param group's hyper-parameters as attributes (<group>/state/<p>,
// <group>/param_groups/<g>). LibTorch's SGD, Adam, AdamW, Adagrad and RMSprop
// are supported; other optimizers are refused with a ConfigError naming them.
#pragma once

#include <cstdint>
#include <string_view>

namespace torch::optim {
class Optimizer;
}

namespace accelerate::checkpoint {

class CheckpointWriter;
class CheckpointReader;

namespace detail {

/// Throws ConfigError (same on every rank) for an optimizer type that cannot be saved.
void check_optimizer_supported(const torch::optim::Optimizer& optimizer, std::string_view group);
/// Bytes of the per-parameter state tensors write_optimizer() writes (for progress).
std::uint64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer);
/// `sharded_over` > 0: the optimizer steps this rank's shard of that many
/// ranks (ShardedOptimizer), so its state differs across ranks and is written
/// one row per rank, with that count in a `sharded_world_size` attribute.
void write_optimizer(CheckpointWriter& writer, std::string_view group, const torch::optim::Optimizer& optimizer,
                     int sharded_over = 0);
/// Replaces the optimizer's state and hyper-parameters with the checkpoint's.
/// ConfigError when the parameter groups or the state do not fit this
/// optimizer, or when sharded state meets an unsharded optimizer (or the
/// other way round) or a different number of ranks than `sharded_over`.
void read_optimizer(CheckpointReader& reader, std::string_view group, torch::optim::Optimizer& optimizer,
                    int sharded_over = 0);

}  // namespace detail
}  // namespace accelerate::checkpoint
