// ACCELERATE_NCCL_CHECK: a failed NCCL call becomes an NcclError with the
// rank, the call, NCCL's error string and its last-error detail. Compiled
// only when the NCCL feature is on.
#pragma once

#include <nccl.h>

namespace accelerate::detail {

[[noreturn]] void throw_nccl_error(ncclResult_t code, ncclComm_t comm, const char* call, const char* file, int line);

inline void check_nccl(ncclResult_t code, ncclComm_t comm, const char* call, const char* file, int line) {
  if (code != ncclSuccess && code != ncclInProgress) [[unlikely]] {
    throw_nccl_error(code, comm, call, file, line);
  }
}

/// NCCL's runtime version as "major.minor.patch".
const char* nccl_runtime_version();

}  // namespace accelerate::detail

/// `comm` may be nullptr when the call has no communicator yet.
#define ACCELERATE_NCCL_CHECK(expr, comm) ::accelerate::detail::check_nccl((expr), (comm), #expr, __FILE__, __LINE__)
