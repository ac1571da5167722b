#include "checkpoint/spare_core.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>
#include <utility>

namespace accelerate::checkpoint::detail {

namespace {
// Below this a hand-over (two wake-ups) costs more than the checksum saves.
constexpr std::size_t kSmallestHandedOver = std::size_t{1} << 20;
}  // namespace

int cores_of_this_rank(int ranks_on_this_host) noexcept {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const int allowed = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : 1;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const long share = online > 0 ? online / std::max(1, ranks_on_this_host) : 1;
  return static_cast<int>(std::max<long>(1, std::min<long>(allowed, share)));
}

SpareCore::SpareCore(int cores) {
  if (cores < 2) return;
  try {
    worker_ = std::thread([this] { serve(); });
  } catch (const std::system_error&) {
    // No thread to be had (a process limit): the work runs inline, as with one core.
  }
}

SpareCore::~SpareCore() {
  if (!worker_.joinable()) return;
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

SpareCore::Task SpareCore::run(std::function<void()> work, std::size_t bytes) {
  if (!threaded() || bytes < kSmallestHandedOver) {
    work();
    return Task(nullptr);
  }
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !busy_; });  // one at a time
    work_ = std::move(work);
    busy_ = true;
  }
  changed_.notify_all();
  return Task(this);
}

void SpareCore::Task::wait() noexcept {
  if (core_ == nullptr) return;
  core_->finish();
  core_ = nullptr;
}

void SpareCore::finish() noexcept {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !busy_; });
}

void SpareCore::serve() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || busy_; });
    if (busy_) {
      std::function<void()> work = std::move(work_);
      lock.unlock();
      work();
      lock.lock();
      busy_ = false;
      changed_.notify_all();
    } else {
      return;  // stopping, with nothing left to run
    }
  }
}

}  // namespace accelerate::checkpoint::detail
