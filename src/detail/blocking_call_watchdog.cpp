#include "detail/blocking_call_watchdog.hpp"

#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "accelerate/error.hpp"

namespace accelerate::detail {
namespace {

using Clock = std::chrono::steady_clock;

struct Armed {
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

  std::uint64_t arm(std::string what, std::chrono::milliseconds limit) {
    const std::lock_guard lock(mutex_);
    if (!started_) {
      std::thread([this] { run(); }).detach();
      started_ = true;
    }
    const std::uint64_t id = next_id_++;
    armed_.emplace(id, Armed{std::move(what), Clock::now() + limit, limit});
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
      report_and_exit(first->second);
    }
  }

  [[noreturn]] static void report_and_exit(const Armed& armed) {
    const std::string message =
        where() + " " + armed.what + " did not return within " + std::to_string(armed.limit.count()) +
        " ms. It is a collective call inside another library (HDF5 over MPI-IO) that cannot time out: a rank "
        "of its communicator died or hangs inside it (the launcher's output, or that rank's own, names it). "
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
    : id_(Watchdog::instance().arm(std::move(what), limit)) {}

BlockingCallWatchdog::~BlockingCallWatchdog() { Watchdog::instance().disarm(id_); }

}  // namespace accelerate::detail
