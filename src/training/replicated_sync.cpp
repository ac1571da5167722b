// ReplicatedSync: DDP (no plugin, NO_SHARD). Every rank holds the whole
// model, gradient and optimizer state; the prepared model's GradientReducer
// all-reduces the gradients per bucket during backward.
#include <torch/nn/module.h>  // torch::Tensor, which 1.13's clip_grad.h does not include
#include <torch/nn/utils/clip_grad.h>

#include "accelerate/training/distributed_model.hpp"
#include "training/distinct_parameters.hpp"
#include "training/gradient_sync_strategy.hpp"

namespace accelerate::training_detail {
namespace {

class ReplicatedSync final : public GradientSyncStrategy {
 public:
  explicit ReplicatedSync(const State& state) : state_(state) {}

  [[nodiscard]] std::string_view name() const override { return "NO_SHARD"; }
  [[nodiscard]] ProcessGroup* overflow_group() override { return nullptr; }

  void configure_model(DistributedModelOptions& options) const override {
    options.reduce_gradients = true;
    options.shard_parameters = false;
  }

  void prepare_optimizer(torch::optim::Optimizer& optimizer, AcceleratedOptimizer& /*prepared*/,
                         const PreparedObjects& /*objects*/) override {
    list_tied_weights_once(optimizer, state_);
  }

  void gather_gradients(AcceleratedOptimizer& /*optimizer*/) const override {}  // all-reduced in backward

  double clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type,
                        const PreparedObjects& /*objects*/) override {
    // A tied weight's gradient counts once in the norm, as the optimizer steps it once.
    return torch::nn::utils::clip_grad_norm_(distinct_tensors(parameters), max_norm, norm_type);
  }

  void clip_grad_value(const std::vector<at::Tensor>& parameters, double clip_value,
                       const PreparedObjects& /*objects*/) override {
    torch::nn::utils::clip_grad_value_(distinct_tensors(parameters), clip_value);
  }

  [[nodiscard]] std::optional<checkpoint::ShardedWeights> model_shards(
      const DistributedModel& /*model*/) const override {
    return std::nullopt;
  }
  [[nodiscard]] std::optional<checkpoint::ShardLayout> optimizer_shards(
      const AcceleratedOptimizer& /*optimizer*/, const PreparedObjects& /*objects*/) const override {
    return std::nullopt;
  }

 private:
  const State& state_;
};

}  // namespace

std::unique_ptr<GradientSyncStrategy> make_replicated_sync(const SyncContext& context) {
  return std::make_unique<ReplicatedSync>(context.state);
}

}  // namespace accelerate::training_detail
