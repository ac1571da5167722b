// Opening a checkpoint file for parallel access: MPI-IO driver, collective
// metadata reads and writes, alignment, and the MPI-IO hints we tune.
//
// Create, open and close are collectives inside HDF5 that cannot time out:
// each runs under the BlockingCallWatchdog with the caller's timeout, and a
// file whose communicator was abandoned after a timeout is given up rather
// than closed (its close would wait forever for the missing rank).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string_view>

#include "checkpoint/hdf5_handle.hpp"

namespace accelerate::checkpoint::detail {

struct ParallelFileOptions {
  std::size_t alignment = std::size_t{1} << 20;
  std::size_t alignment_threshold = 64 * 1024;
};

/// Creates (truncating) `path` collectively over `comm`, within `limit`.
File create_parallel_file(MPI_Comm comm, const std::filesystem::path& path, const ParallelFileOptions& options,
                          std::chrono::milliseconds limit);

/// Opens `path` read-only collectively over `comm`, within `limit`.
File open_parallel_file(MPI_Comm comm, const std::filesystem::path& path, std::chrono::milliseconds limit);

/// Closes `file` (opened over `comm`) within `limit`, reporting a failure
/// as Hdf5Error naming `what`; gives it up unclosed when `comm` was abandoned.
void close_parallel_file(File& file, MPI_Comm comm, std::chrono::milliseconds limit, std::string_view what);

/// The same for destructors: never throws, a failure is ignored.
void close_parallel_file_quietly(File& file, MPI_Comm comm, std::chrono::milliseconds limit,
                                 std::string_view what) noexcept;

/// Dataset transfer list for collective data transfers; `two_phase`
/// selects MPI-IO's collective buffering, otherwise each rank's share goes
/// straight to the file inside the collective call.
PropertyList collective_transfer(bool two_phase);

}  // namespace accelerate::checkpoint::detail
