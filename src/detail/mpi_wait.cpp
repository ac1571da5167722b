#include "detail/mpi_wait.hpp"

#include <string>
#include <thread>

#include "accelerate/error.hpp"
#include "detail/mpi_check.hpp"

namespace accelerate::detail {

void wait_with_timeout(MPI_Request& request, std::chrono::milliseconds timeout, std::string_view what,
                       MPI_Comm comm) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  // Poll eagerly first (most collectives finish in microseconds), then back
  // off so ranks that wait long do not steal cores from the ones computing.
  auto pause = std::chrono::microseconds(0);
  for (int polls = 0;; ++polls) {
    int done = 0;
    ACCELERATE_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done != 0) return;
    if (clock::now() >= deadline) break;
    if (polls > 1000) {
      pause = std::min(std::chrono::microseconds(2000), pause + std::chrono::microseconds(20));
      std::this_thread::sleep_for(pause);
    } else {
      std::this_thread::yield();
    }
  }
  int size = 0;
  MPI_Comm_size(comm, &size);
  throw TimeoutError(where() + " " + std::string(what) + " did not complete within " +
                     std::to_string(timeout.count()) + " ms (communicator of " + std::to_string(size) +
                     " ranks). At least one rank never reached it: it crashed, hangs, or follows a "
                     "different code path. The communicator is unusable now; abort the job "
                     "(accelerate::abort_all) and look for the first error in the log. Raise the limit "
                     "with InitProcessGroupKwargs::timeout or ACCELERATE_TIMEOUT.");
}

}  // namespace accelerate::detail
