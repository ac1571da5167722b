#include "detail/blocking_call_watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "accelerate/error.hpp"
#include "detail/job_step.hpp"

namespace accelerate::detail {
namespace {

using Clock = std::chrono::steady_clock;

// The deadline of the running deadline wait (poll_until), in Clock ticks
// since its epoch; 0 when none runs. Only the main thread waits (funneled).
std::atomic<std::int64_t> running_wait_deadline{0};
// Until when the report of the last deadline wait that ran out may run (it
// asks the other ranks where they are after the wait has ended), in Clock
// ticks; 0 before any wait ran out. Without it a watchdog thread that wakes
// late, after the wait ended, found no running wait and cut the report off.
std::atomic<std::int64_t> timed_out_wait_report_end{0};

Clock::time_point from_ticks(std::int64_t ticks) { return Clock::time_point(Clock::duration(ticks)); }

struct Armed {
  std::string prefix;
  std::string what;
  Clock::time_point deadline;
  std::chrono::milliseconds limit;
};

// One thread for the process, started by the first watched call and never
// stopped: it sleeps on the condition variable while nothing is armed.
class Watchdog {
 public:
  static Watchdog& instance() {
    static Watchdog* const watchdog = new Watchdog;  // never destroyed: the thread outlives static destruction
    return *watchdog;
  }

  std::uint64_t arm(std::string prefix, std::string what, std::chrono::milliseconds limit) {
    const std::lock_guard lock(mutex_);
    if (!started_) {
      std::thread([this] { run(); }).detach();
      started_ = true;
    }
    const std::uint64_t id = next_id_++;
    armed_.emplace(id, Armed{std::move(prefix), std::move(what), Clock::now() + limit, limit});
    changed_.notify_one();
    return id;
  }

  void disarm(std::uint64_t id) {
    const std::lock_guard lock(mutex_);
    armed_.erase(id);
    changed_.notify_one();
  }

 private:
  Watchdog() = default;

  [[noreturn]] void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (armed_.empty()) {
        changed_.wait(lock);
        continue;
      }
      auto first = armed_.begin();
      for (auto it = armed_.begin(); it != armed_.end(); ++it) {
        if (it->second.deadline < first->second.deadline) first = it;
      }
      // A copy: the entry may be disarmed (erased) while the lock is released.
      const Clock::time_point deadline = first->second.deadline;
      if (Clock::now() < deadline) {
        changed_.wait_until(lock, deadline);
        continue;
      }
      // A deadline wait inside the watched section ends by itself and names
      // the missing ranks: let it, unless it too has overrun.
      // The extension is kept in the entry: the wait's own report (asking the
      // other ranks where they are) runs after the wait has ended.
      Clock::time_point wait_end = from_ticks(timed_out_wait_report_end.load(std::memory_order_acquire));
      const std::int64_t wait_ticks = running_wait_deadline.load(std::memory_order_acquire);
      if (wait_ticks != 0) wait_end = std::max(wait_end, from_ticks(wait_ticks) + kDeadlineWaitGrace);
      if (Clock::now() < wait_end) {
        first->second.deadline = wait_end;
        continue;
      }
      report_and_exit(first->second);
    }
  }

  [[noreturn]] static void report_and_exit(const Armed& armed) {
    const std::string message =
        armed.prefix + " " + armed.what + " did not return within " + std::to_string(armed.limit.count()) + " ms" +
        at_training_step() +
        ". It is a blocking collective call (inside MPI, or HDF5 over MPI-IO) that cannot time out: a rank of "
        "its communicator died, was stopped or hangs (the launcher's output, or that rank's own, names it). "
        "Ending this process with exit code " +
        std::to_string(kBlockedCallExitCode) +
        " so that the job ends instead of hanging. If the call is only slow, raise the job's timeout "
        "(ACCELERATE_TIMEOUT, StateOptions::timeout).\n";
    // write(2), not iostreams: the main thread may hold the stream's lock inside the blocked call.
    const char* data = message.data();
    std::size_t left = message.size();
    while (left > 0) {
      const ssize_t written = ::write(STDERR_FILENO, data, left);
      if (written <= 0) break;
      data += written;
      left -= static_cast<std::size_t>(written);
    }
    std::_Exit(kBlockedCallExitCode);  // no MPI call, no exit handlers: both would block on the stuck collective
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::uint64_t, Armed> armed_;
  std::uint64_t next_id_ = 0;
  bool started_ = false;
};

}  // namespace

BlockingCallWatchdog::BlockingCallWatchdog(std::string what, std::chrono::milliseconds limit)
    : BlockingCallWatchdog(std::move(what), limit, where()) {}

BlockingCallWatchdog::BlockingCallWatchdog(std::string what, std::chrono::milliseconds limit, std::string prefix)
    : id_(Watchdog::instance().arm(std::move(prefix), std::move(what), limit)) {}

BlockingCallWatchdog::~BlockingCallWatchdog() { Watchdog::instance().disarm(id_); }

DeadlineWaitMark::DeadlineWaitMark(std::chrono::steady_clock::time_point deadline) noexcept
    : deadline_(deadline),
      previous_(running_wait_deadline.exchange(deadline.time_since_epoch().count(), std::memory_order_acq_rel)) {}

DeadlineWaitMark::~DeadlineWaitMark() {
  // A wait that lasted until its deadline ran out: its report follows.
  if (Clock::now() >= deadline_) {
    timed_out_wait_report_end.store((deadline_ + kDeadlineWaitGrace).time_since_epoch().count(),
                                    std::memory_order_release);
  }
  running_wait_deadline.store(previous_, std::memory_order_release);
}

}  // namespace accelerate::detail
