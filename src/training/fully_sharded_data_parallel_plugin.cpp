#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"

#include <string>

#include "accelerate/error.hpp"
#include "detail/ascii.hpp"

namespace accelerate {

namespace {

std::string normalised(const std::string& value) { return detail::ascii_upper(detail::trim_blanks(value)); }

[[noreturn]] void not_built(const std::string& field, const std::string& value, const std::string& instead) {
  throw ConfigError("FullyShardedDataParallelPlugin: " + field + " = " + value + " is not built in this library. " +
                    instead + " (docs/sharding.md lists the fields).");
}

constexpr std::int64_t kDefaultMinNumParams = 100'000'000;  // Accelerate's size_based_wrap default

}  // namespace

std::optional<ZeroStage> zero_stage_of(const FullyShardedDataParallelPlugin& plugin) {
  // Accelerate accepts the names and their 1-based positions in FSDP's enum.
  const std::string name = normalised(plugin.sharding_strategy);
  if (name == "SHARD_GRAD_OP" || name == "2" || name == "HYBRID_SHARD_ZERO2" || name == "5") {
    return ZeroStage::Gradients;
  }
  if (name == "NO_SHARD" || name == "3") return std::nullopt;
  if (name == "FULL_SHARD" || name == "1" || name == "HYBRID_SHARD" || name == "4") return ZeroStage::Parameters;
  throw ConfigError("FullyShardedDataParallelPlugin: sharding_strategy '" + plugin.sharding_strategy +
                    "' is not one of FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2 (or 1 "
                    "to 5).");
}

bool shards_within_node(const FullyShardedDataParallelPlugin& plugin) {
  const std::string name = normalised(plugin.sharding_strategy);
  return name == "HYBRID_SHARD_ZERO2" || name == "5" || name == "HYBRID_SHARD" || name == "4";
}

UnitPolicy unit_policy_of(const FullyShardedDataParallelPlugin& plugin) {
  const std::string policy = normalised(plugin.auto_wrap_policy);
  if (plugin.wrap_module) {
    if (!policy.empty()) {
      throw ConfigError("FullyShardedDataParallelPlugin: both auto_wrap_policy '" + plugin.auto_wrap_policy +
                        "' and wrap_module are set; they are two forms of one choice. Keep one.");
    }
    return UnitPolicy::by_predicate(plugin.wrap_module);
  }
  if (policy.empty()) return {};
  if (policy == "NO_WRAP") return UnitPolicy::none();
  if (policy == "TRANSFORMER_BASED_WRAP") {
    if (plugin.transformer_cls_names_to_wrap.empty()) {
      throw ConfigError(
          "FullyShardedDataParallelPlugin: auto_wrap_policy transformer_based_wrap needs "
          "transformer_cls_names_to_wrap, the class of the model's repeated block (e.g. {\"Block\"} for a "
          "BlockImpl); a LibTorch module has no _no_split_modules to take it from.");
    }
    return UnitPolicy::by_class(plugin.transformer_cls_names_to_wrap);
  }
  if (policy == "SIZE_BASED_WRAP") return UnitPolicy::by_size(plugin.min_num_params.value_or(kDefaultMinNumParams));
  throw ConfigError("FullyShardedDataParallelPlugin: auto_wrap_policy '" + plugin.auto_wrap_policy +
                    "' is not one of transformer_based_wrap, size_based_wrap, no_wrap (or unset).");
}

void check_plugin(const FullyShardedDataParallelPlugin& plugin) {
  (void)zero_stage_of(plugin);
  (void)unit_policy_of(plugin);
  if (plugin.fsdp_version && *plugin.fsdp_version != 1 && *plugin.fsdp_version != 2) {
    throw ConfigError("FullyShardedDataParallelPlugin: fsdp_version " + std::to_string(*plugin.fsdp_version) +
                      " is neither 1 nor 2.");
  }
  if (!plugin.transformer_cls_names_to_wrap.empty() &&
      normalised(plugin.auto_wrap_policy) != "TRANSFORMER_BASED_WRAP") {
    throw ConfigError(
        "FullyShardedDataParallelPlugin: transformer_cls_names_to_wrap is set but auto_wrap_policy is not "
        "transformer_based_wrap; set auto_wrap_policy = \"transformer_based_wrap\" to use it.");
  }
  if (plugin.min_num_params && normalised(plugin.auto_wrap_policy) != "SIZE_BASED_WRAP") {
    throw ConfigError(
        "FullyShardedDataParallelPlugin: min_num_params is set but auto_wrap_policy is not size_based_wrap; set "
        "auto_wrap_policy = \"size_based_wrap\" to use it.");
  }
  // reshard_after_forward = false keeps FULL_SHARD's units whole from forward
  // to backward; the other strategies hold whole parameters anyway.
  if (const std::string prefetch = normalised(plugin.backward_prefetch);
      !prefetch.empty() && prefetch != "NO_PREFETCH") {
    not_built("backward_prefetch", plugin.backward_prefetch, "Leave it unset or NO_PREFETCH");
  }
  if (plugin.forward_prefetch) not_built("forward_prefetch", "true", "Leave it false");
  if (plugin.activation_checkpointing && zero_stage_of(plugin) != ZeroStage::Parameters) {
    // It checkpoints FULL_SHARD units (ShardedUnitScope::checkpoint); with no
    // unit live the model's own accelerate::activation_checkpoint calls do the same.
    throw ConfigError(
        "FullyShardedDataParallelPlugin: activation_checkpointing = true checkpoints the FULL_SHARD "
        "units' bodies (ShardedUnitScope::checkpoint), and sharding_strategy '" +
        plugin.sharding_strategy +
        "' has no units. Leave it false and call accelerate::activation_checkpoint(module, fn, inputs...) "
        "around the submodules in the model's forward instead "
        "(accelerate/training/activation_checkpoint.hpp).");
  }
  if (plugin.cpu_offload) not_built("cpu_offload", "true", "Leave it false");
  if (plugin.sync_module_states == false) {
    not_built("sync_module_states", "false",
              "Rank 0's parameters are always broadcast at prepare; leave it unset or true");
  }
  if (plugin.cpu_ram_efficient_loading == true) {
    not_built("cpu_ram_efficient_loading", "true",
              "Every rank builds the whole model before prepare shards it; leave it unset or false");
  }
  if (plugin.mixed_precision_policy) {
    not_built("mixed_precision_policy", "{...}",
              "Leave it unset and set the Accelerator's mixed_precision (bf16 autocast over fp32 shards)");
  }
  if (!plugin.ignored_modules.empty()) {
    not_built("ignored_modules", std::to_string(plugin.ignored_modules.size()) + " module(s)",
              "Every parameter is sharded; freeze what should not train");
  }
  if (plugin.param_init_fn) {
    not_built("param_init_fn", "a function",
              "Build the model with its values on every rank before prepare, which shards it");
  }
  // FULL and SHARDED write the same file: whole tensors, each rank writing
  // its shards' pieces of them, loadable at any rank count and without
  // sharding. FSDP's two differ in how the state reaches the disk (gathered
  // on rank 0, or per rank); here no rank gathers, and the file is the full one.
  if (const std::string type = normalised(plugin.state_dict_type); type == "LOCAL_STATE_DICT") {
    not_built("state_dict_type", plugin.state_dict_type,
              "A checkpoint holds whole tensors, never a rank's flat local shard: use FULL_STATE_DICT or "
              "SHARDED_STATE_DICT (both write the same file)");
  } else if (!type.empty() && type != "SHARDED_STATE_DICT" && type != "FULL_STATE_DICT") {
    throw ConfigError("FullyShardedDataParallelPlugin: state_dict_type '" + plugin.state_dict_type +
                      "' is not one of FULL_STATE_DICT, SHARDED_STATE_DICT, LOCAL_STATE_DICT (or unset).");
  }
}

}  // namespace accelerate
