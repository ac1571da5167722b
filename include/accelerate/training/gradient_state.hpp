// GradientState (seeds: accelerate.state.GradientState): whether the current
// micro-step synchronises gradients, and which prepared data loader the loop
// is iterating (for end_of_dataloader and gather_for_metrics' remainder).
//
// The Accelerator owns one and shares it with its AcceleratedOptimizer and
// AcceleratedScheduler objects; the loaders it prepares report their passes
// to it. Plain bookkeeping: no MPI, no LibTorch.
#pragma once

#include <cstdint>
#include <vector>

#include "accelerate/data/data_loader.hpp"
#include "accelerate/runtime/lifetime.hpp"

namespace accelerate {

/// Seeds' GradientAccumulationPlugin: field names and defaults kept.
struct GradientAccumulationPlugin {
  /// Micro-batches whose gradients are summed before an optimizer step (≥ 1).
  int num_steps = 1;
  /// Accelerate advances its scheduler's internal counter on non-stepping
  /// micro-steps to silence PyTorch's ordering warning; LibTorch has no such
  /// warning, so this is accepted and changes nothing (docs/training.md).
  bool adjust_scheduler = true;
  /// Also synchronise on the last batch of a data loader, so a pass whose
  /// length is not a multiple of num_steps loses no gradients.
  bool sync_with_dataloader = true;
  /// Communicate gradients on every micro-batch (they are still applied
  /// every num_steps): less memory traffic inside no_sync, more network.
  bool sync_each_batch = false;

  /// ConfigError for num_steps < 1.
  void validate() const;
};

class GradientState final : public PassListener {
 public:
  explicit GradientState(GradientAccumulationPlugin plugin = {});
  ~GradientState();
  GradientState(const GradientState&) = delete;
  GradientState& operator=(const GradientState&) = delete;

  [[nodiscard]] const GradientAccumulationPlugin& plugin() const noexcept { return plugin_; }
  [[nodiscard]] int num_steps() const noexcept { return plugin_.num_steps; }

  /// Whether the current micro-step ends with a gradient synchronisation and
  /// an optimizer step (true outside accumulate()).
  [[nodiscard]] bool sync_gradients() const noexcept { return sync_gradients_; }
  void set_sync_gradients(bool value) noexcept { sync_gradients_ = value; }

  /// Accelerate's Accelerator._do_sync: called once per micro-step by
  /// accumulate(). Counts the micro-step and decides sync_gradients: true
  /// every num_steps micro-steps, and on a loader's last batch with
  /// sync_with_dataloader (which also restarts the count).
  void begin_micro_step();
  /// Micro-steps counted since the last synchronisation.
  [[nodiscard]] std::int64_t micro_step() const noexcept { return micro_step_; }
  void set_micro_step(std::int64_t value) noexcept { micro_step_ = value; }
  /// Micro-steps begun by begin_micro_step() since construction (never
  /// reset): the prepared optimizer compares it across its steps to find a
  /// loop that accumulates without accumulate().
  [[nodiscard]] std::uint64_t micro_steps_begun() const noexcept { return micro_steps_begun_; }
  /// Accelerator::backward() calls since construction (never reset).
  [[nodiscard]] std::uint64_t backward_calls() const noexcept { return backward_calls_; }
  /// Counts an Accelerator::backward() call and returns its number (from 1).
  std::uint64_t note_backward() noexcept { return ++backward_calls_; }

  /// The loader the loop is iterating (innermost pass under way), or nullptr.
  [[nodiscard]] const DataLoaderBase* active_dataloader() const noexcept;
  /// The active loader is on its last batch (false without one).
  [[nodiscard]] bool end_of_dataloader() const noexcept;
  /// The active loader's remainder (-1 without one: unknown).
  [[nodiscard]] std::int64_t remainder() const noexcept;
  /// A loader of a pass still under way is being destroyed or released.
  void forget(const DataLoaderBase& loader) noexcept;

  void pass_started(const DataLoaderBase& loader) override;
  void pass_finished(const DataLoaderBase& loader) override;

  /// Ends with this object (with the Accelerator that owns it): optimizers
  /// and schedulers prepared on it stop with an Error after it is gone.
  [[nodiscard]] const Lifetime& lifetime() const noexcept { return lifetime_; }

 private:
  GradientAccumulationPlugin plugin_;
  bool sync_gradients_ = true;
  std::int64_t micro_step_ = 0;
  std::uint64_t micro_steps_begun_ = 0;
  std::uint64_t backward_calls_ = 0;
  std::vector<const DataLoaderBase*> active_;  // innermost last
  Lifetime lifetime_{"the Accelerator (its GradientState)"};
};

}  // namespace accelerate
