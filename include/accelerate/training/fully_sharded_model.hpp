// FullyShardedModel: ZeRO stage 3 (FSDP's FULL_SHARD): each of N ranks
// holds 1/N of a model's parameters, of their gradients and of the
// optimizer state.
//
//   auto net = torch::nn::Sequential(torch::nn::Linear(784, 4096), torch::nn::ReLU(), ...);
//   accelerate::FullyShardedModel model(net, *group);
//   torch::optim::Adam adam(model.parameters(), 1e-3);   // the shards
//   auto loss = loss_fn(model.forward(x), y);
//   loss.backward();       // each unit's gradient reduce-scattered into its shard
//   adam.step();           // steps this rank's shards: no collective
//   adam.zero_grad();
//
// Units. A UnitPolicy (FullShardOptions::units) chooses the submodules that
// are units: by default a Sequential's children; by class, by size or by the
// user's marking for any module. A unit's parameters (those of its
// submodules that no unit inside it claims), flattened in order and padded
// to a multiple of N, are one flat space of which rank r owns the r-th 1/N,
// its shard: a leaf tensor that the optimizer steps. Outside the unit's
// forward and backward its parameters keep their shapes but hold no memory
// (their storage is resized to zero bytes). The parameters no unit claims,
// and a parameter tied across units that do not nest, form the root unit.
//
// Forward. Before a unit runs, its shards are all-gathered into the
// parameters' storage; after it ran, that storage is freed again. An autograd
// hook on the unit's outputs gathers them once more before the unit's
// backward. When the unit's last gradient has been accumulated, its
// gradients are reduce-scattered (averaged over the group) into the shard's
// .grad, added to what is there, and the whole gradients and parameters are
// freed. So at any time a rank holds the whole parameters of the root unit
// and of at most two units (more where units nest), and the whole gradients
// of one. The root unit is gathered from the start of forward until its
// gradients are reduced, at the end of backward.
//
// Who runs the units: LibTorch's C++ modules have no forward hooks. For a
// torch::nn::Sequential, forward(x) replays its children and handles the
// units among them itself. For any other module the user's forward runs (the
// prepared model's call, or between begin_forward() and end_forward()), and
// each unit's class marks its forward with a ShardedUnitScope (two lines;
// accelerate/training/sharded_unit_scope.hpp). The first forward holds every
// unit whole and checks that each ran inside its scope: a unit without one
// is a ConfigError naming it, never a read of freed memory.
//
// With FullShardOptions::replicas (HYBRID_SHARD) the shards are cut over the
// node's ranks and kept once per node: gathers stay inside the node, and each
// unit's reduce-scattered gradient is averaged over the other nodes.
//
// Limits (docs/sharding.md): one forward per backward, and one run of a unit
// per forward (a second forward's graph through a unit is refused in
// backward); a unit's parameters are used inside its forward only (a
// parameter also read outside must be registered there too, which makes it
// the root's); a unit's parameters share one dtype and device, and are all
// trainable or all frozen; buffers stay whole on every rank (broadcast from
// rank 0 at construction, then local, as DistributedModel's are).
// Collective: every rank calls forward() and backward together.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/ordered_dict.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "accelerate/checkpoint/shard_layout.hpp"
#include "accelerate/comm/process_group.hpp"
#include "accelerate/training/unit_policy.hpp"

namespace torch::nn {
class Module;
class Sequential;
class SequentialImpl;
}  // namespace torch::nn
namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

namespace accelerate {

struct FullShardOptions {
  /// Asked when a unit's gradients are complete: false makes this backward a
  /// micro-step that only accumulates, its gradients kept whole on the
  /// parameters until a backward where it is true (FSDP's no_sync). Unset:
  /// every backward reduce-scatters.
  std::function<bool()> sync_in_backward;
  /// The ranks that hold this rank's shards in the other copies of `group`
  /// (HYBRID_SHARD: `group` is the node, `replicas` the cross-node group).
  /// Every copy must have as many ranks, each at the same rank in its copy
  /// (ConfigError otherwise). Each reduce-scattered gradient is then averaged
  /// over them, while every gather stays inside the group. The parameters
  /// start from rank 0 of the first copy everywhere. Unset: `group` is every
  /// rank there is.
  ProcessGroup* replicas = nullptr;
  /// Which submodules are units (default: a Sequential's children).
  UnitPolicy units;
  /// Activation checkpointing: the body a unit's forward passes to
  /// ShardedUnitScope::checkpoint is recomputed in the unit's backward instead
  /// of keeping its activations (one more forward of each such unit per
  /// step). Units whose forward does not call it run as they are.
  bool activation_checkpointing = false;
  /// Free each unit's whole parameters when its forward ends, and gather them
  /// again before its backward (FSDP's default). False: a unit gathered for
  /// its forward stays whole until its gradients are reduce-scattered, which
  /// saves the backward's all-gathers at the price of holding the whole
  /// model between forward and backward (FSDP2's reshard_after_forward=False).
  /// Without autograd (no_grad, eval) units are freed after their forward
  /// either way.
  bool reshard_after_forward = true;
};

class FullyShardedModel {
 public:
  /// Broadcasts the parameters and buffers from rank 0, cuts each unit's
  /// parameters into N shards, keeps this rank's, and frees the rest. Every
  /// rank must pass the same model. Move or cast it before, not after.
  /// ConfigError (on every rank) for a model that cannot be sharded this way.
  FullyShardedModel(std::shared_ptr<torch::nn::Module> model, ProcessGroup& group, FullShardOptions options = {});
  FullyShardedModel(const torch::nn::Sequential& model, ProcessGroup& group, FullShardOptions options = {});
  FullyShardedModel(const FullyShardedModel&) = delete;
  FullyShardedModel& operator=(const FullyShardedModel&) = delete;
  ~FullyShardedModel();

  /// The Sequential's forward, each unit gathered around its own forward.
  /// ConfigError for a model that is not a Sequential: run its own forward
  /// between begin_forward() and end_forward().
  at::Tensor forward(const at::Tensor& input);

  /// Around the model's own forward (any module; the prepared model's call
  /// does this): begin_forward() gathers the root unit (and, in the first
  /// forward, every unit); end_forward() checks that every unit ran inside
  /// its ShardedUnitScope and marked its outputs (ConfigError otherwise);
  /// abort_forward() after a forward that threw.
  void begin_forward();
  void end_forward();
  void abort_forward() noexcept;

  /// This rank's shards, one per unit with parameters, in unit order: what an
  /// optimizer steps. Each has its unit's requires_grad.
  [[nodiscard]] std::vector<at::Tensor> parameters() const;
  /// Re-points an optimizer built over the model's own parameters (before
  /// sharding) at the shards: each param group's parameters are replaced by
  /// the shards of the units they belong to. A unit's parameters must be in
  /// the optimizer all or none, all in one group, and not frozen; the
  /// optimizer must not have stepped. Shards already in it stay.
  void shard_optimizer(torch::optim::Optimizer& optimizer) const;

  /// Releases the shards' gradients (set_to_none) or zeroes them, and any
  /// whole gradient a micro-step kept.
  void zero_grad(bool set_to_none = true);
  /// Clips the total norm of the gradient over every shard of every rank (the
  /// norm of the whole averaged gradient) to `max_norm`; returns the norm
  /// before clipping. Collective.
  double clip_grad_norm_(double max_norm, double norm_type = 2.0);
  /// Clamps every element of the averaged gradient to [-clip_value, clip_value].
  void clip_grad_value_(double clip_value);

  /// The whole model's parameters and buffers under the model's names
  /// ("0.weight", "blocks.0.attn.qkv.weight", ...), gathered unit by unit into new tensors on every rank.
  /// Collective; holds the whole model once.
  [[nodiscard]] torch::OrderedDict<std::string, at::Tensor> full_state_dict();
  /// Takes whole tensors under those names (every parameter and buffer must
  /// be there, with its shape): each rank copies its shard's part. Local.
  void load_full_state_dict(const torch::OrderedDict<std::string, at::Tensor>& state);

  /// Gathers every unit's whole parameters into the module's own parameters
  /// and keeps them there until release_full_parameters() (FSDP's
  /// summon_full_params): for code that reads or writes the module directly,
  /// such as checkpoints. Holds the whole model once. Collective.
  void gather_full_parameters();
  /// Frees them again (at the last of nested gathers). With `write_back`,
  /// each rank first copies its shard's part of the whole parameters (as they
  /// are now) into its shard, so that what was loaded into the module is
  /// trained from. Local.
  void release_full_parameters(bool write_back);

  /// How the shards that `optimizer` steps (after shard_optimizer, or built
  /// over parameters()) map to the model's parameters: what checkpoints use
  /// to store its state as whole per-parameter tensors, in pieces, as they do
  /// for ShardedOptimizer. ConfigError if it steps anything but the shards.
  [[nodiscard]] checkpoint::ShardLayout shard_layout(const torch::optim::Optimizer& optimizer) const;

  /// This rank's pieces of every parameter (views of its shards), by its name
  /// in the Sequential's state, tied names each: what checkpoints write and
  /// read the weights through, so that no rank gathers the whole model.
  [[nodiscard]] checkpoint::ShardedWeights sharded_weights() const;

  [[nodiscard]] const std::shared_ptr<torch::nn::Module>& module() const noexcept { return model_; }
  /// Units with parameters, the root unit included when it has any.
  [[nodiscard]] std::size_t units() const noexcept;
  /// Their names: the qualified name of the unit's module ("" for the root).
  [[nodiscard]] std::vector<std::string> unit_names() const;
  /// Elements of all parameters, and of this rank's shards (padding included).
  [[nodiscard]] std::int64_t total_elements() const noexcept;
  [[nodiscard]] std::int64_t shard_elements() const noexcept;
  /// Bytes of whole parameters held now: zero outside forward and backward.
  [[nodiscard]] std::int64_t whole_parameter_bytes() const noexcept;
  /// Bytes of whole gradients held now (on the parameters, not yet reduced).
  [[nodiscard]] std::int64_t whole_gradient_bytes() const noexcept;

 private:
  friend class ShardedUnitScope;
  struct Unit;
  struct Hooks;
  // The live model and unit index of a module, or {nullptr, 0}.
  static std::pair<FullyShardedModel*, std::size_t> unit_of(const torch::nn::Module* module);
  void choose_units(const UnitPolicy& policy);
  void enter_unit(std::size_t u);
  void leave_unit(std::size_t u) noexcept;
  at::Tensor unit_output(std::size_t u, const at::Tensor& output);
  // Whether unit u's ShardedUnitScope::checkpoint checkpoints.
  [[nodiscard]] bool checkpoints_unit(std::size_t u) const;
  [[nodiscard]] bool is_inside(std::size_t inner, std::size_t outer) const;
  void before_unit_backward(std::size_t u);
  void gather(Unit& unit);
  void reshard(Unit& unit) noexcept;
  void on_gradient_ready(std::size_t u, std::size_t p);
  void launch_ready();
  void reduce(Unit& unit);
  void end_of_backward();
  void reset_backward() noexcept;
  // (ranks the units are cut over, copies of every shard, this rank's copy).
  [[nodiscard]] std::tuple<int, int, int> copies() const;

  std::shared_ptr<torch::nn::Module> model_;
  std::shared_ptr<torch::nn::SequentialImpl> sequential_;  // set: forward(x) replays its children
  ProcessGroup& group_;
  FullShardOptions options_;
  static constexpr std::size_t kNoUnit = static_cast<std::size_t>(-1);
  std::vector<Unit> units_;
  std::size_t root_ = kNoUnit;              // the root unit, when it has parameters
  std::vector<std::size_t> unit_of_child_;  // per child of the Sequential, its unit, or kNoUnit
  std::vector<std::size_t> launch_order_;   // units with trainable parameters, last first: the same on every rank
  std::size_t next_launch_ = 0;
  bool backward_open_ = false;  // end_of_backward() is queued for the running backward
  int full_ = 0;                // gather_full_parameters() calls not yet released: every unit stays whole
  bool checked_ = false;        // a first forward found every unit inside its scope
  std::unique_ptr<Hooks> hooks_;
};

}  // namespace accelerate
