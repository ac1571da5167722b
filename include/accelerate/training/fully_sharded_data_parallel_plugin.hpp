// FullyShardedDataParallelPlugin (the seeds' name and defaults): which ZeRO
// stage the Accelerator trains with, and how FULL_SHARD cuts the model into
// units. sharding_strategy: FULL_SHARD (ZeRO stage 3), SHARD_GRAD_OP (ZeRO
// stage 2), HYBRID_SHARD and HYBRID_SHARD_ZERO2 (stage 3 and stage 2 within
// each node, replicated across nodes) and NO_SHARD (plain DDP). The unit
// fields are auto_wrap_policy and its arguments, or wrap_module, C++'s form
// of a callable policy (docs/sharding.md).
//
// The seeds' other fields exist with their defaults; a value asking for
// something this library does not do is a ConfigError at the Accelerator's
// construction that says so, never silently ignored (check_plugin).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/training/sharded_optimizer.hpp"
#include "accelerate/training/unit_policy.hpp"

namespace accelerate {

struct FullyShardedDataParallelPlugin {
  /// "FULL_SHARD" (the seeds' default), "SHARD_GRAD_OP", "NO_SHARD",
  /// "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"; any case, or the numbers 1 to 5
  /// as in Accelerate.
  std::string sharding_strategy = "FULL_SHARD";
  /// 1 or 2 (unset: 1); both shard as FSDP2's fully_shard does.
  std::optional<int> fsdp_version;

  // --- units (FULL_SHARD and HYBRID_SHARD) ---------------------------------
  /// "transformer_based_wrap", "size_based_wrap" or "no_wrap" (any case).
  /// Unset: a torch::nn::Sequential's children with parameters are the
  /// units; any other model is one unit.
  std::string auto_wrap_policy;
  /// transformer_based_wrap: the class names of the units ("Block" or
  /// "BlockImpl" for a BlockImpl; module_class_is).
  std::vector<std::string> transformer_cls_names_to_wrap;
  /// size_based_wrap: the parameters a unit gathers at least (unset: 10^8,
  /// Accelerate's default).
  std::optional<std::int64_t> min_num_params;
  /// C++'s callable auto_wrap_policy: true makes the submodule `name` a unit.
  /// Not together with auto_wrap_policy.
  UnitPolicy::Predicate wrap_module;

  // --- the seeds' other fields: only the values shown are built ------------
  /// Unset or true (FULL_SHARD's default): units are freed after their
  /// forward and gathered again for their backward. False: they stay whole
  /// from forward to backward (FullShardOptions::reshard_after_forward).
  std::optional<bool> reshard_after_forward;
  /// "NO_PREFETCH" (unset is the same): no unit is gathered ahead of its turn.
  std::string backward_prefetch;
  bool forward_prefetch = false;
  /// true with FULL_SHARD or HYBRID_SHARD: the bodies units pass to
  /// ShardedUnitScope::checkpoint are recomputed in backward. Refused under
  /// the other strategies (accelerate::activation_checkpoint in the model).
  bool activation_checkpointing = false;
  bool cpu_offload = false;
  /// Gathers are limited to the units in use (true; false is accepted: there
  /// is no unlimited mode to turn on).
  bool limit_all_gathers = true;
  /// The optimizer steps the shards and checkpoints name the original
  /// parameters either way: any value is accepted.
  std::optional<bool> use_orig_params;
  /// Rank 0's parameters and buffers are broadcast at prepare either way:
  /// true or unset.
  std::optional<bool> sync_module_states;
  /// The model is built whole on every rank: false or unset.
  std::optional<bool> cpu_ram_efficient_loading;
  /// "FULL_STATE_DICT", "SHARDED_STATE_DICT" or unset: the same file either
  /// way (whole tensors, each rank writing its shards' pieces; no rank
  /// gathers). "LOCAL_STATE_DICT" (a rank's flat shard) is refused.
  std::string state_dict_type;
  /// FSDP's own dtypes ("bf16", ...): unset; the Accelerator's mixed_precision
  /// sets the compute dtype.
  struct MixedPrecisionPolicy {
    std::string param_dtype, reduce_dtype, buffer_dtype;
  };
  std::optional<MixedPrecisionPolicy> mixed_precision_policy;
  /// Modules left out of sharding: none.
  std::vector<std::shared_ptr<torch::nn::Module>> ignored_modules;
  /// Materialising an empty model shard by shard: unset.
  std::function<void(torch::nn::Module&)> param_init_fn;
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

/// The units `plugin` asks for (auto_wrap_policy, wrap_module).
UnitPolicy unit_policy_of(const FullyShardedDataParallelPlugin& plugin);

/// ConfigError naming the first field whose value asks for something not
/// built, with what to do instead.
void check_plugin(const FullyShardedDataParallelPlugin& plugin);

}  // namespace accelerate
