// Optimizer state in a checkpoint: every per-parameter tensor as a dataset
// <group>/state/<p>/<name> (p = the parameter's position across the param
// groups, as in PyTorch's state_dict), scalar per-parameter state and each
// param group's hyper-parameters as attributes (<group>/state/<p>,
// <group>/param_groups/<g>). LibTorch's SGD, Adam, AdamW, Adagrad and RMSprop
// are supported; other optimizers are refused with a ConfigError naming them.
// A sharded optimizer's state is stored in the same layout (see ShardLayout).
#pragma once

#include <cstdint>
#include <string_view>

namespace torch::optim {
class Optimizer;
}

namespace accelerate::checkpoint {

class CheckpointWriter;
class CheckpointReader;
struct ShardLayout;

namespace detail {

class StateWriter;

/// Throws ConfigError (same on every rank) for an optimizer type that cannot be saved.
void check_optimizer_supported(const torch::optim::Optimizer& optimizer, std::string_view group);
/// Bytes of the per-parameter state tensors write_optimizer() writes (for
/// progress): with `shards`, those of the whole tensors the ranks write together.
std::uint64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer, const ShardLayout* shards = nullptr);
/// Writes the optimizer's hyper-parameters and per-parameter state.
/// `shards`: the optimizer steps this rank's shards (ShardedOptimizer), one per
/// param group, laid out as described; the state is still written as whole
/// per-parameter tensors, each rank writing its pieces, so the file is the
/// same whatever the sharding and the number of ranks.
void write_optimizer(StateWriter& writer, std::string_view group, const torch::optim::Optimizer& optimizer,
                     const ShardLayout* shards = nullptr);
/// Replaces the optimizer's state and hyper-parameters with the checkpoint's.
/// With `shards`, each rank reads its shards' pieces of every state tensor,
/// whatever sharding and rank count wrote them. ConfigError when the
/// parameter groups or the state do not fit this optimizer. Files of the
/// earlier per-rank layout (a `sharded_world_size` attribute) load only with
/// the same sharding on the same number of ranks.
void read_optimizer(CheckpointReader& reader, std::string_view group, torch::optim::Optimizer& optimizer,
                    const ShardLayout* shards = nullptr);

}  // namespace detail
}  // namespace accelerate::checkpoint
