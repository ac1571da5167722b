// OptimizerShardedSync: ZeRO stages 1 and 2 (SHARD_GRAD_OP, and
// HYBRID_SHARD_ZERO2 within each node). The model stays whole on every rank;
// the prepared optimizer is wrapped in a ShardedOptimizer, which
// reduce-scatters the gradients per bucket in backward (stage 2) and steps
// this rank's slices only.
#include <string>

#include "accelerate/error.hpp"
#include "accelerate/training/accelerated_optimizer.hpp"
#include "accelerate/training/distributed_data_parallel_kwargs.hpp"
#include "accelerate/training/distributed_model.hpp"
#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"
#include "accelerate/training/sharded_optimizer.hpp"
#include "training/gradient_sync_strategy.hpp"

namespace accelerate::training_detail {
namespace {

class OptimizerShardedSync final : public GradientSyncStrategy {
 public:
  OptimizerShardedSync(const FullyShardedDataParallelPlugin& plugin, SyncContext context)
      : name_(shards_within_node(plugin) ? "HYBRID_SHARD_ZERO2" : "SHARD_GRAD_OP"),
        stage_(*zero_stage_of(plugin)),
        groups_(plugin, context),
        state_(context.state),
        bucket_cap_mb_(context.ddp_kwargs.bucket_cap_mb),
        sync_in_backward_(std::move(context.sync_in_backward)) {}

  [[nodiscard]] std::string_view name() const override { return name_; }
  [[nodiscard]] ProcessGroup* overflow_group() override { return &groups_.world(); }

  void configure_model(DistributedModelOptions& options) const override {
    // Stage 2: no all-reduce and no gradient buckets; the sharded optimizer
    // reduce-scatters the gradients. The model's sync flag still says which
    // backward passes synchronise (accumulate(), no_sync()): the sharded
    // optimizer asks it through sync_in_backward.
    options.reduce_gradients = stage_ == ZeroStage::OptimizerState;
    options.shard_parameters = false;
  }

  void prepare_optimizer(torch::optim::Optimizer& optimizer, AcceleratedOptimizer& prepared,
                         const PreparedObjects& /*objects*/) override {
    list_tied_weights_once(optimizer, state_);
    prepared.shard_with(std::make_shared<ShardedOptimizer>(optimizer, groups_.shards(),
                                                           ShardingOptions{.stage = stage_,
                                                                           .bucket_cap_mb = bucket_cap_mb_,
                                                                           .sync_in_backward = sync_in_backward_,
                                                                           .replicas = groups_.replicas()}));
  }

  void gather_gradients(AcceleratedOptimizer& optimizer) const override { optimizer.sharded()->reduce_gradients(); }

  // The gradients are still local here; the optimizer reduces them into its
  // shards first and clips by the norm over all shards (`parameters` is not
  // consulted, as with Accelerate's FSDP).
  double clip_grad_norm(const std::vector<at::Tensor>& /*parameters*/, double max_norm, double norm_type,
                        const PreparedObjects& objects) override {
    return the_optimizer(objects, "clip_grad_norm_").clip_grad_norm_(max_norm, norm_type);
  }
  void clip_grad_value(const std::vector<at::Tensor>& /*parameters*/, double clip_value,
                       const PreparedObjects& objects) override {
    the_optimizer(objects, "clip_grad_value_").clip_grad_value_(clip_value);
  }

  [[nodiscard]] std::optional<checkpoint::ShardedWeights> model_shards(
      const DistributedModel& /*model*/) const override {
    return std::nullopt;
  }
  [[nodiscard]] std::optional<checkpoint::ShardLayout> optimizer_shards(
      const AcceleratedOptimizer& optimizer, const PreparedObjects& /*objects*/) const override {
    return optimizer.sharded()->shard_layout();
  }

 private:
  // Clipping works on the one prepared optimizer's shards: they hold the whole model's gradient.
  ShardedOptimizer& the_optimizer(const PreparedObjects& objects, const char* call) const {
    if (objects.optimizers.size() != 1) {
      throw ConfigError("Accelerator::" + std::string(call) + ": with " + name_ +
                        ", clipping works on the shards of the one prepared optimizer (the whole model's "
                        "gradient), and " +
                        std::to_string(objects.optimizers.size()) +
                        " are prepared. Prepare one optimizer, or clip through each one's sharded()->" + call + ".");
    }
    return *objects.optimizers.front()->sharded();
  }

  std::string name_;
  ZeroStage stage_;
  ShardGroups groups_;
  const State& state_;
  double bucket_cap_mb_;
  std::function<bool()> sync_in_backward_;
};

}  // namespace

std::unique_ptr<GradientSyncStrategy> make_optimizer_sharded_sync(const FullyShardedDataParallelPlugin& plugin,
                                                                  SyncContext context) {
  return std::make_unique<OptimizerShardedSync>(plugin, std::move(context));
}

}  // namespace accelerate::training_detail
