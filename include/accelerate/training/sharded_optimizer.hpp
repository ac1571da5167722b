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
// flat space, and from construction on they are views of one flat buffer
// holding it. The space is cut into buckets of about bucket_cap_mb, each a
// multiple of N elements (the last padded); rank r owns the r-th 1/N of
// every bucket, its slice, so every shard is the same size and each bucket is
// one reduce-scatter and one all-gather. The user's optimizer is re-pointed
// at the slices, which are ranges of the buffer: it steps the parameters in
// place (no copy of the weights), its temporaries are the size of a slice,
// its hyper-parameters (per group) stay, and its state covers the shard only.
//
// Stage 1 (ZeroStage::OptimizerState): the gradients are already averaged
// (the module is a DistributedModel); step() copies this rank's slices.
// Stage 2 (ZeroStage::Gradients): the module is not wrapped and its
// gradients are local. Each bucket is reduce-scattered into the shard's
// gradient (averaged over the group) as soon as backward has produced all of
// its gradients, and those gradients are released at once, so no rank holds
// the whole gradient; buckets backward did not complete (unused parameters,
// a micro-step that only accumulates) are reduced in step(). Either way the updated slices are then all-gathered into the
// parameters, which stay whole on every rank (stage 3 shards them too; see
// docs/sharding.md).
//
// Replicated shards (HYBRID_SHARD_ZERO2): with `group` the ranks of a node
// and ShardingOptions::replicas the ranks holding the same shard on the other
// nodes, stage 2 reduce-scatters within the node and then averages each
// slice over the replicas, so the shards hold the world's average while
// every parameter all-gather stays inside the node.
//
// Element-wise optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) compute on a
// shard what they compute unsharded, up to rounding; LBFGS, which couples
// all elements, is refused. Collective: every rank calls step() together.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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
  Parameters = 3,      ///< stage 3: the parameters too; FullyShardedModel, not ShardedOptimizer
};

struct ShardingOptions {
  ZeroStage stage = ZeroStage::OptimizerState;
  /// Bytes of parameters per bucket, in MiB (each bucket is one reduce-scatter
  /// and one all-gather; smaller buckets use less temporary memory).
  double bucket_cap_mb = 25.0;
  /// Stage 2: reduce-scatter each bucket during backward, once its last
  /// gradient is accumulated, and release those gradients (ZeRO's bound: at
  /// most a few buckets of whole gradients at any time). Off: every bucket is
  /// reduced in step(), and the whole local gradient exists until then.
  bool reduce_in_backward = true;
  /// Asked at each gradient in backward: false makes this backward a
  /// micro-step that only accumulates (a no_sync), its gradients kept whole
  /// and local until a backward where it is true, or step(). Unset: every
  /// backward synchronises. The Accelerator points it at its models'
  /// require_backward_grad_sync, which accumulate() and no_sync() set.
  std::function<bool()> sync_in_backward;
  /// The ranks that hold this rank's shard in the other copies of `group`
  /// (HYBRID_SHARD_ZERO2: `group` is the node, `replicas` the cross-node
  /// group). Every copy must have as many ranks, each at the same rank in its
  /// copy (ConfigError otherwise). Stage 2 averages each reduce-scattered
  /// slice over them; in stage 1 the gradients come averaged over the world
  /// already. The parameters start from rank 0 of the first copy everywhere.
  /// Unset: `group` is every rank there is.
  ProcessGroup* replicas = nullptr;
};

class ShardedOptimizer {
 public:
  /// Broadcasts the parameters from rank 0 (as DistributedModel does), makes
  /// each param group's parameters views of one flat buffer (their data is
  /// replaced; the tensors, their .grad and autograd hooks stay), and
  /// re-points `optimizer` (which must not have stepped yet) at this rank's
  /// slices of it, one per bucket. Every rank must pass the same parameters,
  /// shapes and dtypes; move or cast the model before, not after.
  /// ConfigError (on every rank) for an optimizer that cannot be sharded.
  ShardedOptimizer(torch::optim::Optimizer& optimizer, ProcessGroup& group, ShardingOptions options = {});
  ShardedOptimizer(const ShardedOptimizer&) = delete;
  ShardedOptimizer& operator=(const ShardedOptimizer&) = delete;
  ~ShardedOptimizer();

  /// The gradients into the shards (this rank's slices copied, or in stage 2
  /// reduce-scattered), the wrapped optimizer's step on this rank's slices of
  /// the parameters, the slices all-gathered. A parameter whose data was
  /// replaced since (not edited in place) is taken back into the buffer first,
  /// so a load_state or an edit between steps is honoured.
  void step();
  /// Clears the shards' gradients and the parameters' (set_to_none: released).
  void zero_grad(bool set_to_none = true);

  /// Brings this step's gradients into the shards now (step() then does not
  /// again): for clipping before the step. In stage 2 the parameters'
  /// gradients are released here. Collective.
  void reduce_gradients();
  /// Buckets reduce-scattered during the backward passes since construction
  /// (the rest were reduced in step()); for tests and benchmarks.
  [[nodiscard]] std::int64_t buckets_reduced_in_backward() const noexcept { return reduced_in_backward_; }
  /// Bytes of stage 2's bucket inputs held now (gradients copied, not yet
  /// reduced): with the parameters' .grad, the whole gradients held.
  [[nodiscard]] std::int64_t bucket_input_bytes() const noexcept;
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
  /// How this rank's shards map to the model's parameters: what checkpoints
  /// use to store the state as whole per-parameter tensors and to cut it
  /// into another sharding's shards on load.
  [[nodiscard]] checkpoint::ShardLayout shard_layout() const;

 private:
  struct FlatGroup;
  struct BucketId {
    std::size_t group;
    std::size_t bucket;
  };
  struct Hooks;
  static void alias_parameter(FlatGroup& flat, std::size_t p);
  static void keep_parameters_aliased(FlatGroup& flat);
  static void link_shard_grad(FlatGroup& flat);
  void gradients_into_shard(FlatGroup& flat);
  void gather_parameters(FlatGroup& flat);
  // Stage 2's reduction, bucket by bucket (in backward or in step()).
  void register_hooks();
  void on_gradient_ready(std::size_t g, std::size_t p);
  void take_gradient(FlatGroup& flat, std::size_t p);
  void copy_gradient(FlatGroup& flat, std::size_t p, const at::Tensor& grad);
  void launch_remaining(bool in_backward);
  void end_of_backward();
  void launch_ready_buckets(bool in_backward);
  void launch(const BucketId& id, bool in_backward);
  void wait_oldest();
  void wait_replica_oldest();
  void finish_reduction();
  void abandon_reduction() noexcept;

  torch::optim::Optimizer& optimizer_;
  ProcessGroup& group_;
  ShardingOptions options_;
  std::vector<FlatGroup> groups_;
  bool reduced_ = false;                // this step's gradients are in the shards
  bool backward_open_ = false;          // end_of_backward() is queued for the running backward
  std::vector<BucketId> launch_order_;  // the same on every rank: last bucket first
  std::size_t next_launch_ = 0;
  std::vector<std::size_t> in_flight_;    // indices into launch_order_, oldest first
  std::vector<std::size_t> replicating_;  // likewise, slices being averaged over the replicas
  std::int64_t reduced_in_backward_ = 0;
  std::unique_ptr<Hooks> hooks_;
};

}  // namespace accelerate
