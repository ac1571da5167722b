#include "accelerate/runtime/lifetime.hpp"

#include "accelerate/error.hpp"
#include "accelerate/format.hpp"

namespace accelerate {

Lifetime::Lifetime(std::string owner) : token_(std::make_shared<const std::string>(std::move(owner))) {}

LifetimeWatch Lifetime::watch() const { return LifetimeWatch(token_); }

void LifetimeWatch::fail(std::string_view call) const {
  throw Error(accelerate::format(
      "{}: {} it was prepared with (or built on) has been destroyed, so it cannot be used any more. Prepared "
      "models, optimizers, schedulers and loaders work only while the Accelerator (or State, or ProcessGroup) they "
      "came from exists: declare that first, so that it outlives them, or prepare the objects again with a new one.",
      call, owner_));
}

}  // namespace accelerate
