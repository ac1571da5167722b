// DistributedModel: data-parallel training of a LibTorch module (what
// PyTorch's DistributedDataParallel does for Python modules).
//
//   auto net = std::make_shared<Net>();
//   accelerate::DistributedModel model(net, *group, {.bucket_cap_mb = 4});
//   auto loss = loss_fn(model.forward<Net>(x), y);   // or net->forward(x)
//   loss.backward();          // gradients are averaged over the group here
//   optimizer.step();
//
// At construction parameters and buffers are broadcast from rank 0 and the
// ranks' parameter lists are compared. Gradients are grouped into buckets
// (reverse registration order, bucket_cap_mb each, the first one smaller);
// a hook on each parameter's gradient accumulator marks it ready, and the
// all-reduce of a bucket is posted as soon as its last gradient is ready, so
// communication overlaps the rest of backward. At the end of backward (an
// autograd final callback) the reducer waits for every bucket, and the
// averaged gradients are in .grad when backward() returns.
// synchronize_gradients() runs the same step explicitly; it is a no-op when
// nothing is pending, and needed only when this rank's backward reached no
// parameter at all (see docs/distributed-model.md).
//
// Every rank must run the same number of synchronising backward passes.
// Inside no_sync() (or with require_backward_grad_sync == false) gradients
// accumulate locally and nothing is communicated; the next synchronising
// backward reduces the accumulated gradients.
//
// With shard_parameters (ZeRO stage 3, the Accelerator's FULL_SHARD) a
// FullyShardedModel holds 1/N of the module's parameters; forward<Net>()
// runs the module's forward between its begin_forward() and end_forward()
// (a torch::nn::Sequential's through its replay) (docs/sharding.md).
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "accelerate/amp/autocast.hpp"
#include "accelerate/comm/operations.hpp"
#include "accelerate/runtime/lifetime.hpp"
#include "accelerate/training/distributed_data_parallel_kwargs.hpp"
#include "accelerate/training/unit_policy.hpp"

namespace torch::nn {
class Module;
class SequentialImpl;
}  // namespace torch::nn

namespace accelerate {

class ProcessGroup;
class FullyShardedModel;

namespace detail {
class GradientReducer;
}
namespace training_detail {
class GradientUseCheck;
}

/// Tuning of the reducer beyond Accelerate's kwargs (defaults are the
/// measured best on CPU/MPI; see docs/distributed-model.md).
struct DistributedModelOptions {
  /// Cap of the first bucket (the last layers, whose gradients are ready
  /// first) in MiB: small, so communication starts early. Negative: same as
  /// bucket_cap_mb.
  double first_bucket_cap_mb = 1.0;
  /// Test pending all-reduces for completion in every gradient hook, which
  /// drives MPI's progress while backward runs (MPI has no progress thread).
  bool progress_in_hooks = true;
  /// Finish the reduction in an autograd final callback at the end of every
  /// synchronising backward. Off: only synchronize_gradients() finishes it.
  bool finalize_at_backward_end = true;
  /// Run forward<Net>() under autocast to this dtype, on the parameters'
  /// device type (the Accelerator's mixed precision). Unset: no autocast.
  std::optional<c10::ScalarType> autocast_dtype;
  AutocastKwargs autocast_kwargs;
  /// Under autocast, return forward<Net>()'s float16/bfloat16 tensors as
  /// float32 (at any depth of a Nestable result), so the loss is computed in
  /// fp32, as Accelerate's prepare does (its convert_outputs_to_fp32).
  bool convert_outputs_to_fp32 = true;
  /// All-reduce the gradients in backward (data parallelism). Off: the model
  /// only broadcasts rank 0's parameters and buffers, and runs forward under
  /// autocast; gradients stay local and no gradient buckets are allocated
  /// (ZeRO stage 2, whose ShardedOptimizer reduces them).
  bool reduce_gradients = true;
  /// ZeRO stage 3: shard the parameters too, unit by unit
  /// (FullyShardedModel; the units chosen by unit_policy). Gradients are then
  /// reduce-scattered into the shards in backward, and reduce_gradients is
  /// ignored.
  bool shard_parameters = false;
  UnitPolicy unit_policy;
  /// With shard_parameters: FullShardOptions::activation_checkpointing (the
  /// units' ShardedUnitScope::checkpoint bodies recomputed in backward).
  bool activation_checkpointing = false;
  /// With shard_parameters: FullShardOptions::reshard_after_forward (false:
  /// units stay whole from their forward to their backward).
  bool reshard_after_forward = true;
  /// With shard_parameters: the ranks to shard over (default: the model's
  /// group) and their replicas on the other nodes (HYBRID_SHARD; see
  /// FullShardOptions::replicas).
  ProcessGroup* shard_group = nullptr;
  ProcessGroup* shard_replicas = nullptr;
};

/// Per-bucket counters (cumulative since construction or reset_counters()).
struct GradientBucketCounters {
  std::vector<std::size_t> parameters;  ///< indices into parameter_names(), in bucket order
  int64_t bytes = 0;                    ///< gradient bytes in the bucket (before compression)
  int64_t launches = 0;                 ///< all-reduces posted
  int64_t launched_in_backward = 0;     ///< posted from a gradient hook: overlaps backward
  int64_t launched_at_finalize = 0;     ///< posted when backward had ended (unused params, order)
  int64_t completed_before_wait = 0;    ///< already complete when the final wait began
};

struct GradientReducerCounters {
  int64_t all_reduces = 0;        ///< bucket all-reduces (the used-parameter check excluded; one rank sends nothing)
  int64_t bytes_all_reduced = 0;  ///< bytes put on the wire by those all-reduces
  int64_t sync_steps = 0;         ///< synchronising backward passes finished
  int64_t local_steps = 0;        ///< backward passes under no_sync (hooks fired, no communication)
  int64_t buffer_broadcasts = 0;  ///< buffer broadcasts at forward
  double finalize_wait_seconds = 0.0;  ///< time spent waiting for buckets after backward
  std::vector<GradientBucketCounters> buckets;
};

class DistributedModel {
 public:
  /// Collective over `group`. Throws ConfigError (no trainable parameters,
  /// parameters on several devices, unsupported kwargs) or CollectiveMismatch
  /// (ranks disagree on the parameter list) on every rank. Once `group` is
  /// destroyed, forward and a synchronising backward throw Error (the model
  /// may still be destroyed, and its module used unwrapped).
  DistributedModel(std::shared_ptr<torch::nn::Module> module, ProcessGroup& group,
                   DistributedDataParallelKwargs kwargs = {}, DistributedModelOptions options = {});
  ~DistributedModel();
  DistributedModel(const DistributedModel&) = delete;
  DistributedModel& operator=(const DistributedModel&) = delete;

  /// The user's module (Accelerate's unwrap_model / extract_model_from_parallel).
  [[nodiscard]] const std::shared_ptr<torch::nn::Module>& module() const noexcept { return module_; }
  [[nodiscard]] std::shared_ptr<torch::nn::Module> unwrap() const { return module_; }

  /// Calls `Net::forward(args...)` on the wrapped module after
  /// prepare_forward(), under autocast when options.autocast_dtype is set
  /// (then with 16-bit outputs made float32, see convert_outputs_to_fp32).
  /// `Net` is the module's concrete type; PreparedModel<Net> supplies it.
  template <typename Net, typename... Args>
  auto forward(Args&&... args) {
    prepare_forward();
    const auto run = [&] {
      if constexpr (std::is_same_v<Net, torch::nn::SequentialImpl> && sizeof...(Args) == 1) {
        if (fully_sharded_) return forward_sharded(std::forward<Args>(args)...);
      }
      if (!fully_sharded_) return module_as<Net>().forward(std::forward<Args>(args)...);
      // Any module: its units mark themselves (ShardedUnitScope).
      begin_sharded_forward();
      auto output = [&] {
        try {
          return module_as<Net>().forward(std::forward<Args>(args)...);
        } catch (...) {
          abort_sharded_forward();
          throw;
        }
      }();
      end_sharded_forward();
      return output;
    };
    if (!autocast_dtype_) return run();
    auto output = [&] {
      AutocastGuard autocast(autocast_device_, *autocast_dtype_, autocast_kwargs_);
      return run();
    }();
    if (convert_outputs_to_fp32_) output = outputs_to_fp32(std::move(output));
    return output;
  }
  /// What forward() does before the module runs: broadcasts rank 0's
  /// buffers (broadcast_buffers; before every forward, as PyTorch's DDP
  /// does) and arms the reducer. Call it when running the module's forward
  /// yourself.
  void prepare_forward();

  /// For the Accelerator (prepare): from now on a gradient reaching this
  /// model's parameters outside Accelerator::backward() (while `pass` reads
  /// 0), or in a backward pass with no forward through forward() or
  /// prepare_forward() since the model's previous pass, is a ConfigError,
  /// thrown from the first gradient hook of the pass (docs/troubleshooting.md).
  void require_accelerator_backward(std::shared_ptr<const std::atomic<std::uint64_t>> pass);

  /// Waits for the pending bucket all-reduces, averages, writes .grad.
  /// Idempotent: a no-op when no synchronising backward is pending.
  void synchronize_gradients();

  /// Whether the next backward reduces gradients (Accelerate's
  /// model.require_backward_grad_sync, driven by accumulate()).
  [[nodiscard]] bool require_backward_grad_sync() const noexcept;
  void set_require_backward_grad_sync(bool value) noexcept;

  /// RAII: no gradient communication while alive (restores the previous setting).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedModel& model) : model_(&model), previous_(model.require_backward_grad_sync()) {
      model.set_require_backward_grad_sync(false);
    }
    ~NoSyncGuard() {
      if (model_ != nullptr) model_->set_require_backward_grad_sync(previous_);
    }
    NoSyncGuard(NoSyncGuard&& other) noexcept
        : model_(std::exchange(other.model_, nullptr)), previous_(other.previous_) {}
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;

   private:
    DistributedModel* model_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  [[nodiscard]] const DistributedDataParallelKwargs& kwargs() const noexcept { return kwargs_; }
  /// Names of the trainable parameters, in registration order.
  [[nodiscard]] const std::vector<std::string>& parameter_names() const noexcept;
  /// Parameter indices of each bucket, in launch order.
  [[nodiscard]] std::vector<std::vector<std::size_t>> bucket_assignment() const;
  [[nodiscard]] GradientReducerCounters counters() const;
  void reset_counters();
  /// The stage 3 sharding of the module (shard_parameters), or nullptr.
  [[nodiscard]] FullyShardedModel* fully_sharded() const noexcept { return fully_sharded_.get(); }

 private:
  std::shared_ptr<torch::nn::Module> module_;
  ProcessGroup& group_;
  LifetimeWatch group_watch_;  // use after the group (its Accelerator) is gone is an Error
  DistributedDataParallelKwargs kwargs_;
  template <class Output>
  static Output outputs_to_fp32(Output output) {
    if constexpr (std::is_same_v<Output, at::Tensor>) {
      const auto type = output.defined() ? output.scalar_type() : c10::ScalarType::Float;
      return type == c10::ScalarType::Half || type == c10::ScalarType::BFloat16 ? output.to(c10::ScalarType::Float)
                                                                                : output;
    } else if constexpr (Nestable<Output>) {
      return from_ivalue<Output>(convert_to_fp32(to_ivalue(output)));
    } else {
      return output;  // a type of the user's own: left as the module returned it
    }
  }

  std::optional<c10::ScalarType> autocast_dtype_;
  c10::DeviceType autocast_device_ = c10::DeviceType::CPU;
  AutocastKwargs autocast_kwargs_;
  bool convert_outputs_to_fp32_ = true;
  // The module as its concrete type: a static_cast, or a dynamic_cast where
  // Net derives from Module virtually (torch::nn::Sequential and the other
  // Cloneable modules).
  template <typename Net>
  Net& module_as() const {
    if constexpr (requires(torch::nn::Module & base) { static_cast<Net&>(base); }) {
      return static_cast<Net&>(*module_);
    } else {
      return dynamic_cast<Net&>(*module_);
    }
  }
  at::Tensor forward_sharded(const at::Tensor& input);
  void begin_sharded_forward();
  void end_sharded_forward();
  void abort_sharded_forward() noexcept;

  std::unique_ptr<detail::GradientReducer> reducer_;              // null without reduce_gradients
  std::unique_ptr<FullyShardedModel> fully_sharded_;              // shard_parameters
  std::unique_ptr<training_detail::GradientUseCheck> use_check_;  // prepared by an Accelerator
  std::vector<std::string> local_names_;                          // parameter_names() without a reducer
  bool local_sync_ = true;                                        // require_backward_grad_sync without a reducer
};

}  // namespace accelerate
