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

void wait_with_timeout(MPI_Request& request, std::chrono::milliseconds timeout, std::string_view what,
                       MPI_Comm comm);

}  // namespace accelerate::detail
