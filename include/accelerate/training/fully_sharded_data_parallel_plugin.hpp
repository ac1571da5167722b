// FullyShardedDataParallelPlugin (the seeds' name): which ZeRO stage the
// Accelerator trains with. Only sharding_strategy is taken; the sharded
// strategies built are SHARD_GRAD_OP (ZeRO stage 2) and NO_SHARD (plain
// DDP). FULL_SHARD and HYBRID_SHARD shard the parameters too (stage 3),
// which is not built: asking for them is a ConfigError that says so
// (docs/sharding.md).
#pragma once

#include <optional>
#include <string>

#include "accelerate/training/sharded_optimizer.hpp"

namespace accelerate {

struct FullyShardedDataParallelPlugin {
  /// "FULL_SHARD" (the seeds' default), "SHARD_GRAD_OP", "NO_SHARD",
  /// "HYBRID_SHARD"; any case, or the numbers 1 to 4 as in Accelerate.
  std::string sharding_strategy = "FULL_SHARD";
};

/// The stage `plugin` asks for: ZeroStage::Gradients for SHARD_GRAD_OP,
/// nullopt for NO_SHARD. ConfigError for the stage 3 strategies and for
/// names that are none of the four.
std::optional<ZeroStage> zero_stage_of(const FullyShardedDataParallelPlugin& plugin);

}  // namespace accelerate
