// ShardedOptimizer: ZeRO stages 1 and 2 over a torch::optim optimizer, so
// that each of N ranks holds 1/N of the optimizer state (stage 1) and, after
// step(), of the gradients (stage 2).
//
//   torch::optim::Adam adam(net->parameters(), 1e-3);       // built as usual
//   accelerate::ShardedOptimizer sharded(adam, *group, {.stage = accelerate::ZeroStage::Gradients});
//   loss.backward();       // stage 2: a plain module, local gradients
//   sharded.step();        // reduce-scatter, step this rank's shard, all-gather
//   sharded.zero_grad();
//
// Layout. The parameters of each param group, flattened in order, form one
// flat space, cut into buckets of about bucket_cap_mb, each padded to a
// multiple of N; rank r owns the r-th 1/N of every bucket, so every shard is
// the same size and each bucket is one reduce-scatter and one all-gather.
// The user's optimizer is re-pointed at one flat shard tensor per param
// group: its hyper-parameters (per group) stay, and its state is built for
// the shard only.
//
// Stage 1 (ZeroStage::OptimizerState): the gradients are already averaged
// (the module is a DistributedModel); step() copies this rank's slices.
// Stage 2 (ZeroStage::Gradients): the module is not wrapped and its
// gradients are local; step() reduce-scatters them bucket by bucket into the
// shard's gradient (averaged over the group) and releases each parameter's
// gradient. Either way the updated slices are then all-gathered into the
// parameters, which stay whole on every rank (stage 3 shards them too; see
// docs/sharding.md).
//
// Element-wise optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) compute on a
// shard what they compute unsharded, up to rounding; LBFGS, which couples
// all elements, is refused. Collective: every rank calls step() together.
#pragma once

#include <cstdint>
#include <vector>

#include "accelerate/checkpoint/shard_layout.hpp"
#include "accelerate/comm/process_group.hpp"

namespace torch::optim {
class Optimizer;
}

namespace accelerate {

/// ZeRO's stages, by what is partitioned across the ranks.
enum class ZeroStage {
  OptimizerState = 1,  ///< stage 1: optimizer state (gradients averaged by DistributedModel)
  Gradients = 2,       ///< stage 2: optimizer state and gradients (local gradients reduce-scattered)
};

struct ShardingOptions {
  ZeroStage stage = ZeroStage::OptimizerState;
  /// Bytes of parameters per bucket, in MiB (each bucket is one reduce-scatter
  /// and one all-gather; smaller buckets use less temporary memory).
  double bucket_cap_mb = 25.0;
};

class ShardedOptimizer {
 public:
  /// Broadcasts the parameters from rank 0 (as DistributedModel does) and
  /// re-points `optimizer` (which must not have stepped yet) at this rank's
  /// shards. Every rank must pass the same parameters, shapes and dtypes.
  /// ConfigError (on every rank) for an optimizer that cannot be sharded.
  ShardedOptimizer(torch::optim::Optimizer& optimizer, ProcessGroup& group, ShardingOptions options = {});
  ShardedOptimizer(const ShardedOptimizer&) = delete;
  ShardedOptimizer& operator=(const ShardedOptimizer&) = delete;
  ~ShardedOptimizer();

  /// This rank's slices of the parameters and of the gradients (copied, or
  /// reduce-scattered in stage 2) into the shards, the wrapped optimizer's
  /// step on the shards, the parameters all-gathered. The parameters are read
  /// on every step, so a load_state or an edit between steps is honoured.
  void step();
  /// Clears the shards' gradients and the parameters' (set_to_none: released).
  void zero_grad(bool set_to_none = true);

  /// Brings this step's gradients into the shards now (step() then does not
  /// again): for clipping before the step. In stage 2 the parameters'
  /// gradients are released here. Collective.
  void reduce_gradients();
  /// Clips the gradient's total norm over all shards of all ranks (the norm
  /// of the whole averaged gradient, padding excluded) to `max_norm`, as
  /// torch::nn::utils::clip_grad_norm_ does; returns the norm before
  /// clipping. Collective.
  double clip_grad_norm_(double max_norm, double norm_type = 2.0);
  /// Clamps every element of the averaged gradient to [-clip_value, clip_value].
  void clip_grad_value_(double clip_value);

  [[nodiscard]] torch::optim::Optimizer& optimizer() noexcept { return optimizer_; }
  [[nodiscard]] ZeroStage stage() const noexcept { return options_.stage; }
  /// Elements of all parameters, and of this rank's shards (padding included).
  [[nodiscard]] std::int64_t total_elements() const noexcept;
  [[nodiscard]] std::int64_t shard_elements() const noexcept;
  /// This rank's shard of param group `g` (the tensor the optimizer steps).
  [[nodiscard]] const at::Tensor& shard(std::size_t g) const;
  /// How this rank's shards map to the model's parameters: what checkpoints
  /// use to store the state as whole per-parameter tensors and to cut it
  /// into another sharding's shards on load.
  [[nodiscard]] checkpoint::ShardLayout shard_layout() const;

 private:
  struct FlatGroup;
  void parameters_into_shard(FlatGroup& flat);
  void gradients_into_shard(FlatGroup& flat);
  void gather_parameters(FlatGroup& flat);

  torch::optim::Optimizer& optimizer_;
  ProcessGroup& group_;
  ShardingOptions options_;
  std::vector<FlatGroup> groups_;
  bool reduced_ = false;  // this step's gradients are in the shards
};

}  // namespace accelerate
