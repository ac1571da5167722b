// ACCELERATE_MPI_CHECK: turns an MPI error code into an MpiError that names
// the rank, the call, the source line, MPI's own error text and a remedy.
// Communicators created by the library use MPI_ERRORS_RETURN so that errors
// reach this check instead of aborting the job inside MPI.
#pragma once

#include <mpi.h>

namespace accelerate::detail {

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

inline void check_mpi(int code, const char* call, const char* file, int line) {
  if (code != MPI_SUCCESS) [[unlikely]] {
    throw_mpi_error(code, call, file, line);
  }
}

}  // namespace accelerate::detail

#define ACCELERATE_MPI_CHECK(expr) ::accelerate::detail::check_mpi((expr), #expr, __FILE__, __LINE__)
