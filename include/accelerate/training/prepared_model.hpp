// PreparedModel<Net>: what Accelerator::prepare returns for a model. A
// shared handle to the model's DistributedModel that remembers the module's
// type, so the prepared model is called like the module itself (as a
// prepared model is in Accelerate):
//
//   auto model = accelerator.prepare(net);     // net: a TORCH_MODULE holder or shared_ptr<Net>
//   auto y = model(x);                         // Net::forward(x), distributed, under autocast
//   auto z = model(x, mask);                   // any forward signature of Net
//   auto scope = accelerator.accumulate(*model);
//   model->no_sync();                          // the DistributedModel's own calls
//
// Copies share one DistributedModel (like torch::nn::ModuleHolder), and the
// handle converts to std::shared_ptr<DistributedModel> for code that keeps
// prepared models without their type.
#pragma once

#include <memory>
#include <utility>

#include "accelerate/error.hpp"
#include "accelerate/training/distributed_model.hpp"

namespace accelerate {

template <class Net>
class PreparedModel {
 public:
  using module_type = Net;

  /// An empty handle (calling it throws ConfigError).
  PreparedModel() = default;
  explicit PreparedModel(std::shared_ptr<DistributedModel> model) noexcept : model_(std::move(model)) {}

  /// DistributedModel::forward<Net>(args...): buffers broadcast, the reducer
  /// armed, autocast and fp32 outputs under mixed precision.
  template <class... Args>
  auto operator()(Args&&... args) const {
    if (!model_) throw ConfigError("PreparedModel: called on an empty handle; assign it from Accelerator::prepare.");
    return model_->template forward<Net>(std::forward<Args>(args)...);
  }

  /// The user's module, with its type (Accelerate's unwrap_model).
  [[nodiscard]] std::shared_ptr<Net> module() const {
    return model_ ? std::static_pointer_cast<Net>(model_->module()) : nullptr;
  }

  DistributedModel* operator->() const noexcept { return model_.get(); }
  DistributedModel& operator*() const noexcept { return *model_; }
  [[nodiscard]] DistributedModel* get() const noexcept { return model_.get(); }
  [[nodiscard]] const std::shared_ptr<DistributedModel>& ptr() const noexcept { return model_; }
  // NOLINTNEXTLINE(google-explicit-constructor): usable wherever a shared_ptr<DistributedModel> is expected.
  operator std::shared_ptr<DistributedModel>() const noexcept { return model_; }
  explicit operator bool() const noexcept { return static_cast<bool>(model_); }

 private:
  std::shared_ptr<DistributedModel> model_;
};

}  // namespace accelerate
