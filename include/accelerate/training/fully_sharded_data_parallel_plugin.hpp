// FullyShardedDataParallelPlugin (the seeds' name): which ZeRO stage the
// Accelerator trains with. Only sharding_strategy is taken: FULL_SHARD (ZeRO
// stage 3, a Sequential's children as units), SHARD_GRAD_OP (ZeRO stage 2),
// HYBRID_SHARD and HYBRID_SHARD_ZERO2 (stage 3 and stage 2 within each node,
// replicated across nodes) and NO_SHARD (plain DDP) (docs/sharding.md).
#pragma once

#include <optional>
#include <string>

#include "accelerate/training/sharded_optimizer.hpp"

namespace accelerate {

struct FullyShardedDataParallelPlugin {
  /// "FULL_SHARD" (the seeds' default), "SHARD_GRAD_OP", "NO_SHARD",
  /// "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"; any case, or the numbers 1 to 5
  /// as in Accelerate.
  std::string sharding_strategy = "FULL_SHARD";
};

/// The stage `plugin` asks for: ZeroStage::Parameters for FULL_SHARD and
/// HYBRID_SHARD, ZeroStage::Gradients for SHARD_GRAD_OP and
/// HYBRID_SHARD_ZERO2, nullopt for NO_SHARD. ConfigError for names that are
/// none of the five.
std::optional<ZeroStage> zero_stage_of(const FullyShardedDataParallelPlugin& plugin);

/// Whether `plugin` shards over each node's ranks and replicates the shards
/// across nodes (HYBRID_SHARD, HYBRID_SHARD_ZERO2), rather than sharding over
/// every rank.
bool shards_within_node(const FullyShardedDataParallelPlugin& plugin);

}  // namespace accelerate
