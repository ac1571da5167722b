// GradientSyncStrategy: how one run synchronises its gradients and where its
// weights and optimizer state live, chosen once from fsdp_plugin. The
// Accelerator holds one and asks it wherever the answer depends on the
// sharding (docs/design.md, "One gradient-sync strategy per run"):
//
//   ReplicatedSync        no plugin, NO_SHARD        DDP: GradientReducer all-reduces
//   OptimizerShardedSync  SHARD_GRAD_OP, HYBRID_SHARD_ZERO2
//                                                    ZeRO-1/2: ShardedOptimizer
//   ParameterShardedSync  FULL_SHARD, HYBRID_SHARD   ZeRO-3: FullyShardedModel
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "accelerate/checkpoint/shard_layout.hpp"
#include "accelerate/comm/process_group.hpp"

namespace torch::optim {
class Optimizer;
}

namespace accelerate {

class AcceleratedOptimizer;
class DistributedModel;
class State;
struct DistributedModelOptions;
struct DistributedDataParallelKwargs;
struct FullyShardedDataParallelPlugin;

namespace training_detail {

/// The Accelerator's prepared objects, which a strategy reads but never owns.
struct PreparedObjects {
  const std::vector<std::shared_ptr<DistributedModel>>& models;
  const std::vector<std::shared_ptr<AcceleratedOptimizer>>& optimizers;
};

/// What a strategy is built from: the Accelerator's world and the settings
/// the sharding reads.
struct SyncContext {
  const State& state;
  ProcessGroup& world;
  ProcessGroupOptions group_options;
  const DistributedDataParallelKwargs& ddp_kwargs;
  /// True while gradients may be communicated in the current backward: the
  /// sharded optimizer's hooks ask it (accumulate(), no_sync()), and it
  /// refuses a gradient from outside Accelerator::backward().
  std::function<bool()> sync_in_backward;
};

class GradientSyncStrategy {
 public:
  GradientSyncStrategy() = default;
  GradientSyncStrategy(const GradientSyncStrategy&) = delete;
  GradientSyncStrategy& operator=(const GradientSyncStrategy&) = delete;
  virtual ~GradientSyncStrategy() = default;

  /// The plugin's sharding_strategy this implements, for messages.
  [[nodiscard]] virtual std::string_view name() const = 0;

  /// The group whose ranks must agree on an fp16 gradient overflow: each
  /// unscales only its shard when sharded; null when every rank holds the
  /// whole gradient.
  [[nodiscard]] virtual ProcessGroup* overflow_group() = 0;

  /// How a prepared model synchronises under this strategy (all-reduce
  /// buckets, none, or units of sharded parameters).
  virtual void configure_model(DistributedModelOptions& options) const = 0;

  /// Makes `prepared` (over `optimizer`) step under this strategy; called
  /// before `prepared` joins `objects.optimizers`.
  virtual void prepare_optimizer(torch::optim::Optimizer& optimizer, AcceleratedOptimizer& prepared,
                                 const PreparedObjects& objects) = 0;

  /// Brings `optimizer`'s gradients to where they are unscaled and stepped
  /// (sharded: reduced into the shards). Collective where sharded.
  virtual void gather_gradients(AcceleratedOptimizer& optimizer) const = 0;

  /// Clips the total norm of the synchronised gradients to `max_norm` and
  /// returns it; `parameters` names them where every rank holds them whole.
  virtual double clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type,
                                const PreparedObjects& objects) = 0;
  virtual void clip_grad_value(const std::vector<at::Tensor>& parameters, double clip_value,
                               const PreparedObjects& objects) = 0;

  /// How `model`'s weights are cut for save_state and load_state; nullopt
  /// when every rank holds them whole.
  [[nodiscard]] virtual std::optional<checkpoint::ShardedWeights> model_shards(const DistributedModel& model) const = 0;
  /// How `optimizer`'s state is cut; nullopt when every rank holds it whole.
  [[nodiscard]] virtual std::optional<checkpoint::ShardLayout> optimizer_shards(
      const AcceleratedOptimizer& optimizer, const PreparedObjects& objects) const = 0;
};

/// The groups a sharded strategy cuts over: the world, or for the hybrid
/// forms (HYBRID_SHARD, HYBRID_SHARD_ZERO2) the node's ranks, with the ranks
/// holding the same shard on the other nodes as their replicas.
class ShardGroups {
 public:
  ShardGroups(const FullyShardedDataParallelPlugin& plugin, const SyncContext& context);
  [[nodiscard]] ProcessGroup& shards() const noexcept { return node_ ? *node_ : *world_; }
  /// Null unless hybrid.
  [[nodiscard]] ProcessGroup* replicas() const noexcept { return replicas_.get(); }
  /// What an fp16 overflow must be agreed over: the world, since a hybrid
  /// shard's replicas unscale the same shard but the nodes differ.
  [[nodiscard]] ProcessGroup& world() const noexcept { return *world_; }

 private:
  ProcessGroup* world_;
  std::unique_ptr<ProcessGroup> node_;
  std::unique_ptr<ProcessGroup> replicas_;
};

/// Lists each tensor of `optimizer` once (a tied weight is listed under each
/// of its names by parameters(), and would be stepped once per name), and
/// says so on the main process when it removed any. For the strategies whose
/// optimizer steps the module's own tensors.
void list_tied_weights_once(torch::optim::Optimizer& optimizer, const State& state);

/// The strategy `plugin` asks for (no plugin: ReplicatedSync). The plugin has
/// passed check_plugin().
std::unique_ptr<GradientSyncStrategy> make_gradient_sync_strategy(const FullyShardedDataParallelPlugin* plugin,
                                                                  SyncContext context);

/// The implementations, one file each.
std::unique_ptr<GradientSyncStrategy> make_replicated_sync(const SyncContext& context);
std::unique_ptr<GradientSyncStrategy> make_optimizer_sharded_sync(const FullyShardedDataParallelPlugin& plugin,
                                                                  SyncContext context);
std::unique_ptr<GradientSyncStrategy> make_parameter_sharded_sync(const FullyShardedDataParallelPlugin& plugin,
                                                                  SyncContext context);

}  // namespace training_detail
}  // namespace accelerate
