// Dynamic loss scaling for fp16 training (seeds: GradScalerKwargs; PyTorch's
// torch.amp.GradScaler, which LibTorch's C++ frontend does not have).
//
// fp16 gradients underflow to zero when they are small. The scaler multiplies
// the loss by a large factor S before backward, so the gradients are S times
// larger, and divides them by S before the optimizer uses them. When a
// gradient overflows (inf or NaN) the step is skipped and S shrinks; after
// growth_interval clean steps in a row S grows:
//
//   accelerate::GradScaler scaler;                     // S = 65536
//   for (auto& batch : loader) {
//     optimizer.zero_grad();
//     {
//       accelerate::AutocastGuard autocast(c10::DeviceType::CUDA, c10::kHalf);
//       loss = loss_fn(model(batch.data), batch.target);
//     }
//     scaler.scale(loss).backward();
//     scaler.unscale_(optimizer);                      // optional: e.g. to clip
//     torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
//     scaler.step(optimizer);                          // skipped on inf/NaN
//     scaler.update();                                 // S: backoff or growth
//   }
//
// The rules of PyTorch's GradScaler hold: unscale_ at most once per optimizer
// between two update() calls (a second call is an error, as is unscale_
// after step); step unscales first when unscale_ was not called; update
// backs off by backoff_factor when any optimizer stepped over inf/NaN since
// the last update, else counts a clean step and multiplies S by
// growth_factor when the count reaches growth_interval (a scale that would
// overflow fp32 is not taken). A disabled scaler passes everything through.
//
// Differences from PyTorch, on purpose:
// - Gradients that were not all-reduced (local clipping, model parallelism,
//   a custom reducer) can overflow on one rank only; then the ranks must
//   still agree to skip. Give the scaler a ProcessGroup and the found-inf
//   flag is all-reduced (MAX) in unscale_, which then becomes collective:
//   every rank of the group must call unscale_/step the same number of times.
//   After an ordinary data-parallel all-reduce the gradients are identical
//   on every rank, so no group is needed.
// - S lives on the host (a float, as PyTorch's fp32 scale tensor) instead of
//   on the device: step() must read found-inf on the host anyway, because the
//   C++ optimizers cannot skip a step from a device flag, so a device-side
//   scale would save nothing.
// - Gradients must be fp32 (fp32 master parameters). fp16 gradients throw,
//   as in PyTorch (unscaling in fp16 loses the precision scaling protects).
//   Sparse gradients throw ConfigError (not supported).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

namespace accelerate {

class ProcessGroup;

/// Seeds' GradScalerKwargs: field names and defaults kept.
struct GradScalerKwargs {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  bool enabled = true;
};

/// Everything a checkpoint needs to resume a scaler: the scale, the count of
/// clean steps since the last change, and the kwargs that drive updates.
struct GradScalerState {
  float scale = 65536.0F;
  std::int64_t growth_tracker = 0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;

  /// A dict with PyTorch's state_dict keys ("scale", "growth_factor",
  /// "backoff_factor", "growth_interval", "_growth_tracker").
  [[nodiscard]] c10::IValue to_ivalue() const;
  /// The inverse of to_ivalue; ConfigError names a missing or mistyped key.
  static GradScalerState from_ivalue(const c10::IValue& value);
  /// One 0-d tensor per key of to_ivalue (float32 scale, float64 factors,
  /// int64 counters), for tensor-only checkpoint formats.
  [[nodiscard]] std::map<std::string, at::Tensor> to_tensors() const;
  /// The inverse of to_tensors; ConfigError names a missing key or a tensor
  /// that is not a single number.
  static GradScalerState from_tensors(const std::map<std::string, at::Tensor>& tensors);
};

class GradScaler {
 public:
  /// Throws ConfigError for a non-positive or non-finite init_scale, a
  /// growth_factor <= 1, a backoff_factor outside (0, 1) or a
  /// growth_interval < 1 (PyTorch's rules). With `found_inf_group`, the
  /// found-inf flag of every unscale_ is agreed over that group (see top of
  /// file); the group must outlive the scaler.
  explicit GradScaler(const GradScalerKwargs& kwargs = {}, ProcessGroup* found_inf_group = nullptr);

  /// loss × S, with S a 0-d fp32 tensor as in PyTorch (type promotion: a
  /// 0-d fp16 loss becomes fp32, larger fp16 tensors stay fp16); `loss`
  /// itself when disabled.
  [[nodiscard]] at::Tensor scale(const at::Tensor& loss) const;
  /// Each tensor × S (e.g. several losses backpropagated separately).
  [[nodiscard]] std::vector<at::Tensor> scale(const std::vector<at::Tensor>& outputs) const;

  /// Divides the optimizer's gradients by S in place and records whether any
  /// was inf/NaN. Throws ConfigError when called twice for the same
  /// optimizer (or for a parameter already unscaled) before update(), or
  /// after step(). No-op when disabled.
  void unscale_(torch::optim::Optimizer& optimizer);
  /// The same for a list of parameters (their .grad()); step() of an
  /// optimizer owning exactly these parameters then does not unscale again.
  void unscale_(const std::vector<at::Tensor>& parameters);

  /// Unscales (unless done) and calls optimizer.step() when no gradient of
  /// this optimizer was inf/NaN. Returns whether it stepped. Throws
  /// ConfigError when called twice for one optimizer before update().
  /// Disabled: always steps and returns true.
  bool step(torch::optim::Optimizer& optimizer);
  /// The same, calling `do_step` instead of optimizer.step(): for a wrapper
  /// that steps the optimizer itself (ShardedOptimizer: step, then all-gather).
  bool step(torch::optim::Optimizer& optimizer, const std::function<void()>& do_step);

  /// Backs off or grows S from what the optimizers found since the last
  /// update, and readies every optimizer for the next iteration. Throws
  /// ConfigError when nothing was unscaled since the last update (PyTorch's
  /// "no inf checks were recorded"): call it after step(). No-op when
  /// disabled.
  void update();
  /// Sets S to `new_scale` (> 0, finite; ConfigError otherwise), keeps the
  /// clean-step count, and readies every optimizer, as PyTorch's
  /// update(new_scale).
  void update(double new_scale);

  /// S; 1.0 when disabled.
  [[nodiscard]] double get_scale() const noexcept;
  /// Whether any gradient unscaled since the last update() was inf/NaN.
  [[nodiscard]] bool found_inf() const noexcept;
  [[nodiscard]] bool is_enabled() const noexcept { return kwargs_.enabled; }
  [[nodiscard]] std::int64_t growth_tracker() const noexcept { return growth_tracker_; }
  [[nodiscard]] const GradScalerKwargs& kwargs() const noexcept { return kwargs_; }

  /// The checkpointable state. Throws ConfigError when disabled (PyTorch
  /// returns an empty dict there; state_dict() below does the same).
  [[nodiscard]] GradScalerState state() const;
  void load_state(const GradScalerState& state);
  /// PyTorch-compatible: the dict of GradScalerState::to_ivalue, or an empty
  /// dict when disabled.
  [[nodiscard]] c10::IValue state_dict() const;
  /// No-op when disabled; an empty dict into an enabled scaler throws
  /// ConfigError (it came from a disabled one).
  void load_state_dict(const c10::IValue& state_dict);

 private:
  struct Unscaled {
    bool found_inf = false;
  };
  void unscale_parameters(const std::vector<at::Tensor>& parameters, const char* call);
  void check_not_stepped(const torch::optim::Optimizer& optimizer, const char* call) const;

  GradScalerKwargs kwargs_;
  ProcessGroup* found_inf_group_;
  float scale_;
  std::int64_t growth_tracker_ = 0;
  // Since the last update(): which unscale_ call each parameter went
  // through (index into unscaled_), and which optimizers stepped.
  std::vector<Unscaled> unscaled_;
  std::unordered_map<const void*, std::size_t> unscaled_parameters_;
  std::unordered_set<const torch::optim::Optimizer*> stepped_;
};

}  // namespace accelerate
