#include "detail/mpi_wait.hpp"

#include <string>
#include <thread>

#include "accelerate/error.hpp"
#include "detail/mpi_check.hpp"

namespace accelerate::detail {

void PollBackoff::pause() {
  ++polls_;
  if (polls_ < 4096) return;
  if (!long_ && std::chrono::steady_clock::now() - started_ < std::chrono::seconds(1)) {
    std::this_thread::yield();
  } else {
    long_ = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void wait_with_timeout(MPI_Request& request, std::chrono::milliseconds timeout, std::string_view what,
                       MPI_Comm comm) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  PollBackoff backoff;
  for (;;) {
    int done = 0;
    ACCELERATE_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done != 0) return;
    if (clock::now() >= deadline) break;
    backoff.pause();
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
