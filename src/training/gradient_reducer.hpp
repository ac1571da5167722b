// GradientReducer: the engine behind DistributedModel. Owns the gradient
// buckets, the hooks on the parameters' gradient accumulators, and the
// bucket all-reduces in flight.
//
// One synchronising step:
//   hook(p)   after AccumulateGrad wrote p.grad: copy it into p's slot of
//             its bucket (pre-divided by the world size), or, with
//             gradient_as_bucket_view, make p.grad that slot; when the
//             bucket's last slot is filled, post the all-reduces of all
//             complete buckets in bucket order (the order is identical on
//             every rank, whatever order the gradients arrive in).
//   finalize  fill the slots of parameters that got no gradient (zeros, or
//             gradients accumulated under no_sync), post the remaining
//             buckets in order, post the used-parameter count, wait, and
//             write the averaged gradients back into .grad.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "accelerate/comm/work.hpp"
#include "accelerate/runtime/lifetime.hpp"
#include "accelerate/training/distributed_model.hpp"
#include "training/power_sgd.hpp"

namespace accelerate {
class ProcessGroup;
}
namespace accelerate::training_detail {
class GradientUseCheck;
}

namespace accelerate::detail {

struct GradientReducerConfig {
  int64_t first_cap_bytes = 1 << 20;
  int64_t cap_bytes = 25 << 20;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  std::optional<c10::ScalarType> wire_dtype;  ///< compression type, if any
  std::optional<PowerSgdOptions> power_sgd;   ///< low-rank compression of the buckets, if any
  bool progress_in_hooks = true;
  bool finalize_at_backward_end = true;
};

class GradientReducer {
 public:
  GradientReducer(std::vector<at::Tensor> parameters, std::vector<std::string> names, ProcessGroup& group,
                  GradientReducerConfig config);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  [[nodiscard]] bool sync_enabled() const noexcept { return sync_enabled_; }
  void set_sync_enabled(bool value) noexcept { sync_enabled_ = value; }
  /// A synchronising forward ran: finalize() must run even if no hook fires.
  void arm();
  /// Completes the pending synchronising step (no-op when none is pending).
  void finalize();

  /// The Accelerator's misuse checks, run first in every hook (owned by the
  /// DistributedModel, which outlives this reducer); nullptr: none.
  void set_use_check(training_detail::GradientUseCheck* check) noexcept { use_check_ = check; }

  /// Called by the accumulator hook of parameter `index`.
  void on_gradient_ready(std::size_t index);

  [[nodiscard]] const std::vector<std::string>& names() const noexcept { return names_; }
  [[nodiscard]] std::vector<std::vector<std::size_t>> assignment() const;
  [[nodiscard]] GradientReducerCounters counters() const;
  void reset_counters();
  void note_buffer_broadcast() {
    std::lock_guard lock(mutex_);
    ++counters_.buffer_broadcasts;
  }

 private:
  struct Slot {
    at::Tensor parameter;
    at::Tensor view;  // the parameter's slot in its bucket, shaped like the parameter
    std::size_t bucket = 0;
    bool ready = false;       // gradient arrived in this synchronising step
    bool used_local = false;  // gradient arrived since the last synchronisation
  };
  struct Bucket {
    std::vector<std::size_t> slots;
    at::Tensor flat;  // contiguous gradients
    at::Tensor wire;  // what is all-reduced: flat, or its compressed copy
    std::size_t pending = 0;
    std::unique_ptr<Work> work;
    bool launched = false;
    bool compressed = false;  // this step's reduction runs through the PowerSGD compressor
    GradientBucketCounters counters;
  };

  void begin_step();
  void fill_slot(Slot& slot);
  [[nodiscard]] bool grad_is_view(const Slot& slot) const;
  void adopt_view(Slot& slot);
  void launch_ready_buckets(bool in_backward);
  void launch(Bucket& bucket, bool in_backward);
  void progress();
  [[nodiscard]] bool may_communicate_here(const Bucket& bucket) const;
  void finalize_locked();
  void end_local_backward();

  std::vector<std::string> names_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  ProcessGroup& group_;
  LifetimeWatch group_watch_;  // a backward after the group is gone is an Error
  GradientReducerConfig config_;
  double scale_ = 1.0;  // 1 / world size
  std::thread::id owner_;
  struct Hooks;  // the gradient accumulators (kept alive) and our hooks on them
  std::unique_ptr<Hooks> hooks_;
  std::unique_ptr<PowerSgdCompressor> compressor_;  // with PowerSGD on more than one rank
  training_detail::GradientUseCheck* use_check_ = nullptr;

  mutable std::mutex mutex_;
  bool sync_enabled_ = true;
  bool armed_ = false;
  bool in_step_ = false;
  bool in_local_backward_ = false;
  std::size_t next_launch_ = 0;
  GradientReducerCounters counters_;
};

}  // namespace accelerate::detail
