// The choice of a run's gradient-sync strategy from its plugin.
#include "training/gradient_sync_strategy.hpp"

#include <string>
#include <utility>

#include "accelerate/runtime/logging.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"
#include "accelerate/training/sharded_optimizer.hpp"
#include "training/distinct_parameters.hpp"

namespace accelerate::training_detail {

std::unique_ptr<GradientSyncStrategy> make_gradient_sync_strategy(const FullyShardedDataParallelPlugin* plugin,
                                                                  SyncContext context) {
  // NO_SHARD (or no plugin at all) is DDP.
  const std::optional<ZeroStage> stage = plugin != nullptr ? zero_stage_of(*plugin) : std::nullopt;
  if (!stage) return make_replicated_sync(context);
  if (*stage == ZeroStage::Parameters) return make_parameter_sharded_sync(*plugin, std::move(context));
  return make_optimizer_sharded_sync(*plugin, std::move(context));
}

ShardGroups::ShardGroups(const FullyShardedDataParallelPlugin& plugin, const SyncContext& context)
    : world_(&context.world) {
  if (shards_within_node(plugin)) {
    node_ = ProcessGroup::node(context.state, context.group_options);
    replicas_ = ProcessGroup::cross_node(context.state, context.group_options);
  }
}

void list_tied_weights_once(torch::optim::Optimizer& optimizer, const State& state) {
  const std::size_t removed = deduplicate_param_groups(optimizer, "Accelerator::prepare");
  if (removed > 0 && state.is_main_process()) {
    Logger(state, "accelerate")
        .info("Accelerator::prepare: the optimizer listed " + std::to_string(removed) +
              " tensor(s) more than once (tied weights, which parameters() lists under each name); each is now "
              "listed once, so that every step updates it once. Build the optimizer over distinct tensors to "
              "silence this.");
  }
}

}  // namespace accelerate::training_detail
