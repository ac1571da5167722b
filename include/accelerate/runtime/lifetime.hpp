// Lifetime / LifetimeWatch: using an object after something it borrows from
// is gone becomes an Error instead of undefined behaviour.
//
// An owner (State, ProcessGroup, GradientState) holds a Lifetime; whatever
// keeps a reference to it (a prepared model, optimizer, scheduler or loader)
// holds a LifetimeWatch and checks it before using the reference:
//
//   watch_.check("AcceleratedOptimizer::step");   // Error once the owner is destroyed
//
// The check costs one atomic load. Ownership is not shared: keeping a State
// alive past its Accelerator would keep MPI from being finalised in order.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace accelerate {

class LifetimeWatch;

/// Held by an owner; ends with it. Moving it moves the identity along.
class Lifetime {
 public:
  /// `owner` names the owner in the error ("the Accelerator's ProcessGroup").
  explicit Lifetime(std::string owner);
  Lifetime(const Lifetime&) = delete;
  Lifetime& operator=(const Lifetime&) = delete;
  Lifetime(Lifetime&&) noexcept = default;
  Lifetime& operator=(Lifetime&&) noexcept = default;
  ~Lifetime() = default;

  [[nodiscard]] LifetimeWatch watch() const;

 private:
  std::shared_ptr<const std::string> token_;
};

/// Held by a borrower. A default-constructed watch watches nothing and
/// always passes.
class LifetimeWatch {
 public:
  LifetimeWatch() = default;

  /// Whether the watched owner was destroyed.
  [[nodiscard]] bool expired() const noexcept { return watching_ && token_.expired(); }
  /// Throws Error, naming `call` and the owner, once the owner was destroyed.
  void check(std::string_view call) const {
    if (expired()) fail(call);
  }

 private:
  friend class Lifetime;
  explicit LifetimeWatch(const std::shared_ptr<const std::string>& token)
      : token_(token), owner_(token ? *token : std::string()), watching_(token != nullptr) {}
  [[noreturn]] void fail(std::string_view call) const;

  std::weak_ptr<const std::string> token_;
  std::string owner_;  // kept: the token's copy is gone when the message needs it
  bool watching_ = false;
};

}  // namespace accelerate
