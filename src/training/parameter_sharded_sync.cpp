// ParameterShardedSync: ZeRO stage 3 (FULL_SHARD, and HYBRID_SHARD within
// each node). The prepared model is a FullyShardedModel over the plugin's
// units: parameters, gradients and optimizer state live in each rank's
// shards, gradients are reduce-scattered per unit in backward, and the
// user's optimizer is re-pointed at the shards.
#include <string>

#include "accelerate/error.hpp"
#include "accelerate/training/accelerated_optimizer.hpp"
#include "accelerate/training/distributed_model.hpp"
#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"
#include "accelerate/training/fully_sharded_model.hpp"
#include "training/gradient_sync_strategy.hpp"

namespace accelerate::training_detail {
namespace {

class ParameterShardedSync final : public GradientSyncStrategy {
 public:
  ParameterShardedSync(const FullyShardedDataParallelPlugin& plugin, const SyncContext& context)
      : name_(shards_within_node(plugin) ? "HYBRID_SHARD" : "FULL_SHARD"),
        unit_policy_(unit_policy_of(plugin)),
        activation_checkpointing_(plugin.activation_checkpointing),
        reshard_after_forward_(plugin.reshard_after_forward.value_or(true)),
        groups_(plugin, context) {}

  [[nodiscard]] std::string_view name() const override { return name_; }
  [[nodiscard]] ProcessGroup* overflow_group() override { return &groups_.world(); }

  void configure_model(DistributedModelOptions& options) const override {
    options.reduce_gradients = false;
    options.shard_parameters = true;
    options.unit_policy = unit_policy_;
    options.activation_checkpointing = activation_checkpointing_;
    options.reshard_after_forward = reshard_after_forward_;
    // Hybrid: the node's ranks shard, their replicas on the other nodes
    // average; otherwise the model's own group (the world) shards.
    options.shard_group = groups_.replicas() != nullptr ? &groups_.shards() : nullptr;
    options.shard_replicas = groups_.replicas();
  }

  // The model holds the shards; the optimizer is re-pointed at them (the
  // shards hold each tied weight once, so no de-duplication is needed).
  void prepare_optimizer(torch::optim::Optimizer& optimizer, AcceleratedOptimizer& /*prepared*/,
                         const PreparedObjects& objects) override {
    the_model(objects, "prepare").shard_optimizer(optimizer);
  }

  void gather_gradients(AcceleratedOptimizer& /*optimizer*/) const override {}  // in the shards since backward

  // As with FSDP, `parameters` is not consulted: the gradients are the shards'.
  double clip_grad_norm(const std::vector<at::Tensor>& /*parameters*/, double max_norm, double norm_type,
                        const PreparedObjects& objects) override {
    return the_model(objects, "clip_grad_norm_").clip_grad_norm_(max_norm, norm_type);
  }
  void clip_grad_value(const std::vector<at::Tensor>& /*parameters*/, double clip_value,
                       const PreparedObjects& objects) override {
    the_model(objects, "clip_grad_value_").clip_grad_value_(clip_value);
  }

  // The weights go to and from the file in each rank's pieces.
  [[nodiscard]] std::optional<checkpoint::ShardedWeights> model_shards(const DistributedModel& model) const override {
    FullyShardedModel* const sharded = model.fully_sharded();
    return sharded != nullptr ? std::optional(sharded->sharded_weights()) : std::nullopt;
  }
  [[nodiscard]] std::optional<checkpoint::ShardLayout> optimizer_shards(const AcceleratedOptimizer& optimizer,
                                                                        const PreparedObjects& objects) const override {
    return the_model(objects, "save_state").shard_layout(optimizer.optimizer());
  }

 private:
  // The parameters, gradients and optimizer state live in the one prepared model's shards.
  FullyShardedModel& the_model(const PreparedObjects& objects, const char* call) const {
    std::vector<FullyShardedModel*> sharded;
    for (const auto& model : objects.models) {
      if (model->fully_sharded() != nullptr) sharded.push_back(model->fully_sharded());
    }
    if (sharded.size() != 1) {
      throw ConfigError("Accelerator::" + std::string(call) + ": with " + name_ +
                        ", the parameters, gradients and optimizer state live in the one prepared model's shards, "
                        "and " +
                        std::to_string(sharded.size()) +
                        " models are prepared. Prepare one model, before its optimizer (prepare(model, optimizer) "
                        "does).");
    }
    return *sharded.front();
  }

  std::string name_;
  UnitPolicy unit_policy_;
  bool activation_checkpointing_;
  bool reshard_after_forward_;
  ShardGroups groups_;
};

}  // namespace

std::unique_ptr<GradientSyncStrategy> make_parameter_sharded_sync(const FullyShardedDataParallelPlugin& plugin,
                                                                  SyncContext context) {
  return std::make_unique<ParameterShardedSync>(plugin, context);
}

}  // namespace accelerate::training_detail
