// TimeoutPolicy: what a backend's collective does when it misses its
// deadline. Shared by the MPI and NCCL backends (and set by ProcessGroup from
// its options), so neither backend's headers pull in the other's.
#pragma once

#include <chrono>

namespace accelerate::detail {

struct TimeoutPolicy {
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  bool abort_job = true;  ///< after reporting, MPI_Abort (true) or throw TimeoutError (false)
};

}  // namespace accelerate::detail
