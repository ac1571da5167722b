#include "checkpoint/hdf5_turn.hpp"

#include <mutex>

namespace accelerate::checkpoint::detail {
namespace {

std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

thread_local int turns_held = 0;

}  // namespace

Hdf5Turn::Hdf5Turn() {
  hdf5_mutex().lock();
  ++turns_held;
}

Hdf5Turn::~Hdf5Turn() {
  --turns_held;
  hdf5_mutex().unlock();
}

bool Hdf5Turn::held_by_this_thread() noexcept { return turns_held > 0; }

}  // namespace accelerate::checkpoint::detail
