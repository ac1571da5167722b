// Small helpers shared by the test suites.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "accelerate/error.hpp"
#include "detail/remove_tree.hpp"

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

/// A fresh directory under the temporary directory, the same on every rank
/// of MPI_COMM_WORLD (created by rank 0; collective).
inline std::filesystem::path shared_temp_directory(const std::string& name) {
  char path[512] = {};
  if (world_rank() == 0) {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("accelerate_" + name + "_" + std::to_string(::getpid()));
    accelerate::detail::remove_tree(dir);
    std::filesystem::create_directories(dir);
    std::snprintf(path, sizeof path, "%s", dir.c_str());
  }
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

/// Removes a shared_temp_directory once every rank is done with it (collective).
inline void remove_shared_directory(const std::filesystem::path& dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) accelerate::detail::remove_tree(dir);
}

}  // namespace accelerate::testing
