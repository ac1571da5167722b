// FlatParameters: a list of parameters moved into flat storage, so that
// whatever walks them (an optimizer step, a norm, a copy) can do it in one pass
// per buffer instead of one operation per tensor.
//
//   std::vector<at::Tensor> params = net->parameters();
//   accelerate::FlatParameters flat(params);
//   // every parameter's data is now a range of flat.groups()[k].values,
//   // every parameter's .grad a range of flat.groups()[k].grads
//
// The parameters are grouped by (dtype, device), in the order they are first
// met; each group gets one contiguous buffer of values and one of gradients,
// and each parameter, in turn, the next range of both. A tensor listed twice
// (a tied weight: one tensor under two names) is taken once. The parameters
// keep their identity (the same at::Tensor, the same autograd leaf): only
// their data is re-pointed, so modules, optimizers and hooks that hold them
// see the flat storage.
//
// Gradients: a parameter that requires grad gets a .grad at once, its range
// of the flat gradient (zero, or the gradient it had); with
// `link_gradients = false` only those that already have a gradient do, and
// the others when link_gradients() finds one. Backward then accumulates
// straight into the flat gradient. A gradient that is later replaced by
// another tensor (zero_grad(set_to_none), a loss scaler that assigns, the
// first backward of a parameter without one) is copied back and linked by
// link_gradients(); an undefined gradient stays undefined there. Parameters
// that do not require grad get no gradient.
//
// Do not resize, set_() or set_data() the parameters afterwards: that points
// them away from the buffer. keep_aliased() puts a parameter that was pointed
// away (a torch::load into the module, which assigns) back, copying its new
// values in; a change of size, dtype or device is a ConfigError there (build
// a new FlatParameters instead, as the fused optimizers do).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace accelerate {

class FlatParameters {
 public:
  /// One (dtype, device) group: its parameters in order and their ranges.
  struct Group {
    std::vector<at::Tensor> parameters;
    std::vector<std::int64_t> offsets;  ///< offsets[i] = start of parameter i; back() = total
    at::Tensor values;                  ///< 1-D, every parameter's data a range of it
    at::Tensor grads;                   ///< 1-D, the gradients of those that require grad

    [[nodiscard]] std::int64_t numel() const { return offsets.empty() ? 0 : offsets.back(); }
  };

  FlatParameters() = default;
  /// Moves `parameters` (defined, dense, floating point, not on the meta
  /// device) into flat storage. ConfigError otherwise. `link_gradients`:
  /// whether every parameter that requires grad gets its range as .grad now,
  /// or only those that have a gradient (see above).
  explicit FlatParameters(const std::vector<at::Tensor>& parameters, bool link_gradients = true);

  [[nodiscard]] const std::vector<Group>& groups() const { return groups_; }
  /// Distinct parameters held, over all groups.
  [[nodiscard]] std::size_t size() const;
  /// Whether `parameter` (by identity) is one of those held.
  [[nodiscard]] bool holds(const at::Tensor& parameter) const;
  /// Whether `parameters`, in order, are exactly those this was built from
  /// (after taking each tensor once).
  [[nodiscard]] bool built_from(const std::vector<at::Tensor>& parameters) const;

  /// Zeroes every flat gradient (one fill per group); a parameter whose
  /// gradient is defined but another tensor gets its range instead.
  void zero_grad();
  /// Points each parameter whose .grad is defined but not its range of the
  /// flat gradient back at it, copying the values in. Returns how many.
  std::size_t link_gradients();
  /// Puts each parameter whose data is no longer its range of the flat
  /// values back, copying its current values in. Returns how many.
  /// ConfigError for a parameter that changed size, dtype or device.
  std::size_t keep_aliased();
  /// Whether every parameter still has its group's dtype and device and its
  /// number of elements (so that keep_aliased() can put it back).
  [[nodiscard]] bool still_fits() const;

 private:
  std::vector<Group> groups_;
  std::vector<at::Tensor> listed_;  // the distinct parameters in the order given
};

}  // namespace accelerate
