// Opening a checkpoint file for parallel access: MPI-IO driver, collective
// metadata reads and writes, alignment, and the MPI-IO hints we tune.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <filesystem>

#include "checkpoint/hdf5_handle.hpp"

namespace accelerate::checkpoint::detail {

struct ParallelFileOptions {
  std::size_t alignment = std::size_t{1} << 20;
  std::size_t alignment_threshold = 64 * 1024;
};

/// Creates (truncating) `path` collectively over `comm`.
File create_parallel_file(MPI_Comm comm, const std::filesystem::path& path, const ParallelFileOptions& options);

/// Opens `path` read-only collectively over `comm`.
File open_parallel_file(MPI_Comm comm, const std::filesystem::path& path);

/// Dataset transfer list for collective data transfers; `two_phase`
/// selects MPI-IO's collective buffering, otherwise each rank's share goes
/// straight to the file inside the collective call.
PropertyList collective_transfer(bool two_phase);

}  // namespace accelerate::checkpoint::detail
