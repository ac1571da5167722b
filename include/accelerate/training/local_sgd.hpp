// LocalSGD (seeds: accelerate.local_sgd.LocalSGD): every process takes
// optimizer steps on its own gradients, with no gradient all-reduce, and
// every `local_sgd_steps` steps the processes average their parameters.
// Communication falls by that factor, at the price of replicas that drift
// apart between two averages (Lin et al., "Don't use large mini-batches,
// use local SGD").
//
//   {
//     accelerate::LocalSGD local_sgd(accelerator, *model, /*local_sgd_steps=*/8);
//     for (auto& batch : *loader) {
//       auto loss = loss_fn(model(batch.data), batch.target);
//       accelerator.backward(loss);     // local gradients only
//       optimizer->step();
//       optimizer->zero_grad();
//       local_sgd.step();               // every 8th call: parameters averaged
//     }
//   }                                   // and once more here, at the end
//
// While it lives, the model is under no_sync (accumulate() keeps that). The
// average is collective: every process must call step() equally often. It
// is one all-reduce per dtype of a flat copy of the parameters. Buffers are
// not averaged (as in Accelerate). With one process, or enabled = false,
// nothing changes: the model synchronises gradients as usual.
#pragma once

#include <cstdint>
#include <optional>

#include "accelerate/training/distributed_model.hpp"

namespace accelerate {

class Accelerator;
class ProcessGroup;

class LocalSGD {
 public:
  /// Throws ConfigError when local_sgd_steps < 1.
  LocalSGD(Accelerator& accelerator, DistributedModel& model, std::int64_t local_sgd_steps, bool enabled = true);
  /// The same over any group the model trains on.
  LocalSGD(ProcessGroup& group, DistributedModel& model, std::int64_t local_sgd_steps, bool enabled = true);
  /// Averages the parameters a last time (collective), then lifts no_sync.
  /// While an exception unwinds, only lifts no_sync: another process may not
  /// reach its own average, and waiting for it would hang.
  ~LocalSGD() noexcept(false);
  LocalSGD(const LocalSGD&) = delete;
  LocalSGD& operator=(const LocalSGD&) = delete;

  /// Counts an optimizer step; every local_sgd_steps-th averages the parameters.
  void step();
  /// Averages the parameters over the processes now (collective).
  void average_parameters();

  [[nodiscard]] bool enabled() const noexcept { return enabled_; }
  [[nodiscard]] std::int64_t local_sgd_steps() const noexcept { return local_sgd_steps_; }
  /// step() calls so far.
  [[nodiscard]] std::int64_t num_steps() const noexcept { return num_steps_; }
  /// Parameter averages so far (the final one included once it ran).
  [[nodiscard]] std::int64_t averages() const noexcept { return averages_; }

 private:
  ProcessGroup& group_;
  DistributedModel& model_;
  std::int64_t local_sgd_steps_;
  bool enabled_;
  std::int64_t num_steps_ = 0;
  std::int64_t averages_ = 0;
  int uncaught_ = 0;
  std::optional<DistributedModel::NoSyncGuard> no_sync_;
};

}  // namespace accelerate
