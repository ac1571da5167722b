#include "detail/mpi_wait.hpp"

#include <thread>

#include "detail/deadline_comm.hpp"

namespace accelerate::detail {

void PollBackoff::pause() {
  ++polls_;
  if (polls_ < spins_) return;
  if (!long_ && std::chrono::steady_clock::now() - started_ < std::chrono::seconds(1)) {
    std::this_thread::yield();
  } else {
    long_ = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void wait_with_timeout(MPI_Request& request, std::chrono::milliseconds timeout, std::string_view what, MPI_Comm comm) {
  DeadlineComm(comm, timeout).complete(request, what);
}

}  // namespace accelerate::detail
