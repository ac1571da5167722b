// GradientUseCheck: what the gradient hooks of a model prepared by an
// Accelerator check (docs/troubleshooting.md, "Training-loop misuse"):
//
//   - a gradient outside Accelerator::backward() (loss.backward()): the loss
//     was not divided by gradient_accumulation_steps nor scaled for fp16;
//   - the first gradient of an Accelerator::backward() pass when no forward
//     with gradients went through the prepared model since the model's
//     previous pass (the unwrapped module's forward was called): autocast,
//     the buffer broadcast and the arming of the reducer were skipped.
//
// The Accelerator's pass number is non-zero while its backward() runs. A
// hook pays one atomic load and one comparison; a forward one increment.
// The inputs are the program's own calls, the same on every rank, so every
// rank throws at its first hook of the pass, before the pass posts anything.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "accelerate/runtime/lifetime.hpp"

namespace accelerate::training_detail {

/// ConfigError: a gradient reached `what` (a prepared model's parameter)
/// outside Accelerator::backward(). Checks `watch` first, so that a backward
/// after the Accelerator is gone reports that instead.
[[noreturn]] void gradient_outside_accelerator_backward(const LifetimeWatch& watch, const std::string& what);

class GradientUseCheck {
 public:
  /// `pass`: the Accelerator's pass number. `bypass_skips`: what the prepared
  /// forward does that a bypass loses, for the message.
  GradientUseCheck(std::shared_ptr<const std::atomic<std::uint64_t>> pass, std::string bypass_skips)
      : pass_(std::move(pass)), bypass_skips_(std::move(bypass_skips)) {}

  /// A forward with gradients went through the prepared model.
  void note_forward() noexcept { ++forwards_; }

  /// Every gradient hook of the model, before it uses the gradient of
  /// `parameter`.
  void on_gradient(const LifetimeWatch& watch, const std::string& parameter) {
    const std::uint64_t pass = pass_->load(std::memory_order_acquire);
    if (pass != 0 && pass == seen_pass_) return;  // a later gradient of an accepted pass
    first_gradient_of_pass(watch, parameter, pass);
  }

 private:
  void first_gradient_of_pass(const LifetimeWatch& watch, const std::string& parameter, std::uint64_t pass);

  std::shared_ptr<const std::atomic<std::uint64_t>> pass_;
  std::string bypass_skips_;
  std::uint64_t forwards_ = 0;
  std::uint64_t forwards_at_pass_ = 0;  // forwards_ when the last accepted pass began
  std::uint64_t seen_pass_ = 0;
};

}  // namespace accelerate::training_detail
