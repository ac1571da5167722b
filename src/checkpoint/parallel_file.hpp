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

/// How a new file places its objects. Padding is bounded by the data, not
/// by the number of datasets: only a dataset of at least
/// alignment_threshold(alignment) bytes starts on an `alignment` boundary, so
/// the gap before it (less than `alignment`) is under 1/16 of its size, and
/// of the metadata blocks only the last one's unused tail (under 64 KiB) is
/// left over. A file is thus at most its data × 17/16 + 64 KiB + the
/// metadata itself (a few hundred bytes per dataset).
struct ParallelFileOptions {
  std::size_t alignment = std::size_t{1} << 20;
};

/// Datasets of at least this many times the alignment are aligned.
inline constexpr std::size_t kAlignedDatasetFactor = 16;
/// Never align objects smaller than this, whatever the alignment.
inline constexpr std::size_t kMinAlignedDatasetBytes = std::size_t{64} << 10;
/// HDF5's metadata aggregation block (H5Pset_meta_block_size).
inline constexpr std::size_t kMetadataBlockSize = std::size_t{64} << 10;

/// The size from which a dataset starts on an `alignment` boundary
/// (H5Pset_alignment's threshold): max(64 KiB, 16 × alignment).
[[nodiscard]] constexpr std::size_t alignment_threshold(std::size_t alignment) noexcept {
  return alignment > kMinAlignedDatasetBytes / kAlignedDatasetFactor ? alignment * kAlignedDatasetFactor
                                                                     : kMinAlignedDatasetBytes;
}

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
