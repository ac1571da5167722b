// Completing a non-blocking MPI request with a deadline.
//
// The polling rhythm shared by every deadline wait, and a shorthand for
// completing one request through DeadlineComm.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string_view>

#include "detail/blocking_call_watchdog.hpp"

namespace accelerate::detail {

/// How a thread waits for MPI: MPI progresses non-blocking collectives only
/// inside MPI calls, so the waiter keeps testing. It spins first (most
/// operations finish in microseconds), then yields the core between tests
/// (ranks may outnumber cores), and only after a second of waiting - a late
/// rank, not a slow network - sleeps a millisecond between tests.
class PollBackoff {
 public:
  /// `spins`: tests before the first yield. One where ranks outnumber cores:
  /// a spinning waiter then holds the core the awaited rank needs.
  explicit PollBackoff(unsigned spins = kSpins) : spins_(spins) {}
  static constexpr unsigned kSpins = 4096;
  void pause();
  /// True once the wait has lasted more than a second.
  [[nodiscard]] bool waited_long() const { return long_; }

 private:
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  unsigned spins_;
  unsigned polls_ = 0;
  bool long_ = false;
};

/// The one waiting loop of the library's deadline waits (Work handles of
/// both backends, DeadlineComm): tests `done()` in PollBackoff's rhythm
/// until it is true (returns true) or `deadline` passes (returns false).
/// Once the wait has lasted a second, `while_waiting_long()` runs between
/// tests (e.g. answering another rank's arrival query). A blocking-call
/// watchdog around the wait lets it end and report first (DeadlineWaitMark).
template <class Done, class WhileWaitingLong>
bool poll_until(std::chrono::steady_clock::time_point deadline, Done&& done, WhileWaitingLong&& while_waiting_long,
                unsigned spins = PollBackoff::kSpins) {
  const DeadlineWaitMark mark(deadline);
  PollBackoff backoff(spins);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (backoff.waited_long()) while_waiting_long();
    backoff.pause();
  }
  return true;
}

/// Completes `request` on `comm` within `timeout` (DeadlineComm::complete);
/// TimeoutError names `what` and, where `comm` carries an ArrivalBoard, the
/// ranks that never arrived.
void wait_with_timeout(MPI_Request& request, std::chrono::milliseconds timeout, std::string_view what, MPI_Comm comm);

}  // namespace accelerate::detail
