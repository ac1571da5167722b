#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"

#include <string>

#include "accelerate/error.hpp"
#include "detail/ascii.hpp"

namespace accelerate {

namespace {

std::string normalised(const FullyShardedDataParallelPlugin& plugin) {
  return detail::ascii_upper(detail::trim_blanks(plugin.sharding_strategy));
}

}  // namespace

std::optional<ZeroStage> zero_stage_of(const FullyShardedDataParallelPlugin& plugin) {
  // Accelerate accepts the names and their 1-based positions in FSDP's enum.
  const std::string name = normalised(plugin);
  if (name == "SHARD_GRAD_OP" || name == "2" || name == "HYBRID_SHARD_ZERO2" || name == "5") {
    return ZeroStage::Gradients;
  }
  if (name == "NO_SHARD" || name == "3") return std::nullopt;
  if (name == "FULL_SHARD" || name == "1") return ZeroStage::Parameters;
  if (name == "HYBRID_SHARD" || name == "4") {
    throw ConfigError(detail::where() + " FullyShardedDataParallelPlugin: sharding_strategy '" +
                      plugin.sharding_strategy +
                      "' shards the parameters within each node and replicates them across nodes, which is not "
                      "built. Use \"FULL_SHARD\" (everything sharded over every rank) or \"HYBRID_SHARD_ZERO2\" "
                      "(optimizer state and gradients sharded within each node) (docs/sharding.md).");
  }
  throw ConfigError(
      detail::where() + " FullyShardedDataParallelPlugin: sharding_strategy '" + plugin.sharding_strategy +
      "' is not one of FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2 (or 1 to 5).");
}

bool shards_within_node(const FullyShardedDataParallelPlugin& plugin) {
  const std::string name = normalised(plugin);
  return name == "HYBRID_SHARD_ZERO2" || name == "5";
}

}  // namespace accelerate
