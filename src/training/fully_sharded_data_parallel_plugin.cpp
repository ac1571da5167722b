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
  if (name == "FULL_SHARD" || name == "1" || name == "HYBRID_SHARD" || name == "4") return ZeroStage::Parameters;
  throw ConfigError(
      detail::where() + " FullyShardedDataParallelPlugin: sharding_strategy '" + plugin.sharding_strategy +
      "' is not one of FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2 (or 1 to 5).");
}

bool shards_within_node(const FullyShardedDataParallelPlugin& plugin) {
  const std::string name = normalised(plugin);
  return name == "HYBRID_SHARD_ZERO2" || name == "5" || name == "HYBRID_SHARD" || name == "4";
}

}  // namespace accelerate
