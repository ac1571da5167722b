// BlockingCallWatchdog: a deadline for the calls we make that cannot time
// out: HDF5's MPI-IO (file create, open and close, collective dataset
// transfers, metadata flushes), and MPI's own blocking steps (MPI_Init,
// communicator creation, MPI_Finalize).
//
// Our own collectives poll non-blocking MPI until a deadline (DeadlineComm)
// and can throw; a rank blocked inside H5Fclose or MPI_Init cannot. When a
// peer dies or is stopped inside such a call, the survivors would wait there
// forever. While a BlockingCallWatchdog is alive, a shared watchdog thread
// checks its deadline; when it passes, the thread prints what was blocked,
// where and for how long, and ends this process with exit code 3 (the code
// of an aborted job after a collective timeout). It makes no MPI call, so it
// is safe under MPI_THREAD_FUNNELED (and during MPI_Init); the launcher sees
// the exit and ends the rest of the job. Document each use: what the call is
// and which timeout.
//
// A watched section may contain our own deadline waits (poll_until). Those
// end by themselves and name the missing ranks, which the watchdog cannot:
// while one is running (DeadlineWaitMark), or one ran out and its report is
// being written, an expired watchdog waits for it to end, plus a grace period
// for its report, before it ends the process.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace accelerate::detail {

/// The exit code of a process the watchdog ends.
inline constexpr int kBlockedCallExitCode = 3;

class BlockingCallWatchdog {
 public:
  /// Arms the deadline `limit` from now for the call `what` (named in the
  /// report, after this rank's `[rank r/n on host]` prefix).
  BlockingCallWatchdog(std::string what, std::chrono::milliseconds limit);
  /// As above with the report's prefix given: for calls made before MPI can
  /// say which rank this is (MPI_Init).
  BlockingCallWatchdog(std::string what, std::chrono::milliseconds limit, std::string prefix);
  ~BlockingCallWatchdog();
  BlockingCallWatchdog(const BlockingCallWatchdog&) = delete;
  BlockingCallWatchdog& operator=(const BlockingCallWatchdog&) = delete;

 private:
  std::uint64_t id_;
};

/// Marks a deadline wait of this process that ends by itself by `deadline`
/// (poll_until): an expired watchdog lets it finish and report first, also
/// when the wait has ended by running out and only its report runs.
class DeadlineWaitMark {
 public:
  explicit DeadlineWaitMark(std::chrono::steady_clock::time_point deadline) noexcept;
  ~DeadlineWaitMark();
  DeadlineWaitMark(const DeadlineWaitMark&) = delete;
  DeadlineWaitMark& operator=(const DeadlineWaitMark&) = delete;

 private:
  std::chrono::steady_clock::time_point deadline_;
  std::int64_t previous_;
};

/// How long an expired watchdog waits beyond a running deadline wait's own
/// deadline: the wait's report asks the other ranks where they are (2 s).
inline constexpr std::chrono::seconds kDeadlineWaitGrace{5};

}  // namespace accelerate::detail
