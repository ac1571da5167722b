#include "accelerate/training/gradient_state.hpp"

#include <algorithm>
#include <string>

#include "accelerate/error.hpp"

namespace accelerate {

void GradientAccumulationPlugin::validate() const {
  if (num_steps < 1) {
    throw ConfigError("GradientAccumulationPlugin: num_steps is " + std::to_string(num_steps) +
                      "; it counts micro-batches per optimizer step and must be at least 1.");
  }
}

GradientState::GradientState(GradientAccumulationPlugin plugin) : plugin_(plugin) { plugin_.validate(); }

GradientState::~GradientState() = default;

void GradientState::begin_micro_step() {
  ++micro_steps_begun_;
  if (plugin_.sync_with_dataloader && end_of_dataloader()) {
    micro_step_ = 0;
    sync_gradients_ = true;
    return;
  }
  micro_step_ += 1;
  sync_gradients_ = micro_step_ % plugin_.num_steps == 0;
  if (sync_gradients_) micro_step_ = 0;
}

const DataLoaderBase* GradientState::active_dataloader() const noexcept {
  return active_.empty() ? nullptr : active_.back();
}

bool GradientState::end_of_dataloader() const noexcept {
  const DataLoaderBase* loader = active_dataloader();
  return loader != nullptr && loader->end_of_dataloader();
}

std::int64_t GradientState::remainder() const noexcept {
  const DataLoaderBase* loader = active_dataloader();
  return loader == nullptr ? -1 : loader->remainder();
}

void GradientState::forget(const DataLoaderBase& loader) noexcept {
  active_.erase(std::remove(active_.begin(), active_.end(), &loader), active_.end());
}

void GradientState::pass_started(const DataLoaderBase& loader) {
  forget(loader);  // a pass the loop abandoned (break) restarts
  active_.push_back(&loader);
}

void GradientState::pass_finished(const DataLoaderBase& loader) { forget(loader); }

}  // namespace accelerate
