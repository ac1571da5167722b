// Completing a non-blocking MPI request with a deadline.
//
// Blocking MPI calls cannot time out, so every blocking collective the
// library runs is issued non-blocking and completed here. On timeout the
// request is left pending (MPI cannot cancel a collective) and TimeoutError
// tells the caller to abort the job: the communicator is no longer usable.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string_view>

namespace accelerate::detail {

/// How a thread waits for MPI: MPI progresses non-blocking collectives only
/// inside MPI calls, so the waiter keeps testing. It spins first (most
/// operations finish in microseconds), then yields the core between tests
/// (ranks may outnumber cores), and only after a second of waiting - a late
/// rank, not a slow network - sleeps a millisecond between tests.
class PollBackoff {
 public:
  void pause();
  /// True once the wait has lasted more than a second.
  [[nodiscard]] bool waited_long() const { return long_; }

 private:
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  unsigned polls_ = 0;
  bool long_ = false;
};

void wait_with_timeout(MPI_Request& request, std::chrono::milliseconds timeout, std::string_view what,
                       MPI_Comm comm);

}  // namespace accelerate::detail
