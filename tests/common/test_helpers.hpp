// Small helpers shared by the test suites.
#pragma once

#include <mpi.h>

#include <string>

#include "accelerate/error.hpp"

namespace accelerate::testing {

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

/// The message of the `Exception` that `fn()` throws, or a marker that makes
/// any substring check fail when it throws nothing.
template <typename Exception = ConfigError, typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Exception& error) {
    return error.what();
  }
  return "<no exception>";
}

}  // namespace accelerate::testing
