// BlockingCallWatchdog: a deadline for the collective calls we make into
// other libraries that cannot time out, chiefly HDF5's MPI-IO (file create,
// open and close, collective dataset transfers).
//
// Our own collectives poll non-blocking MPI until a deadline (DeadlineComm)
// and can throw; a rank blocked inside H5Fclose cannot. When a peer dies
// inside such a call, the survivors would wait there forever. While a
// BlockingCallWatchdog is alive, a shared watchdog thread checks its
// deadline; when it passes, the thread prints what was blocked, where and
// for how long, and ends this process with exit code 3 (the code of an
// aborted job after a collective timeout). It makes no MPI call, so it is
// safe under MPI_THREAD_FUNNELED; the launcher sees the exit and ends the
// rest of the job. Document each use: what the call is and which timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace accelerate::detail {

/// The exit code of a process the watchdog ends.
inline constexpr int kBlockedCallExitCode = 3;

class BlockingCallWatchdog {
 public:
  /// Arms the deadline `limit` from now for the call `what` (named in the report).
  BlockingCallWatchdog(std::string what, std::chrono::milliseconds limit);
  ~BlockingCallWatchdog();
  BlockingCallWatchdog(const BlockingCallWatchdog&) = delete;
  BlockingCallWatchdog& operator=(const BlockingCallWatchdog&) = delete;

 private:
  std::uint64_t id_;
};

}  // namespace accelerate::detail
