#include "checkpoint/parallel_file.hpp"

#include <string>

#include "checkpoint/hdf5_binding.hpp"
#include "detail/blocking_call_watchdog.hpp"
#include "detail/unique_comm.hpp"

namespace accelerate::checkpoint::detail {
namespace {

PropertyList file_access(MPI_Comm comm, const std::string& what) {
  require_single_parallel_hdf5();
  // Our error messages carry HDF5's stack; its own printing would duplicate it on every rank.
  static const bool quiet = [] { return H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0; }();
  (void)quiet;
  PropertyList fapl(H5Pcreate(H5P_FILE_ACCESS), what);
  ACCELERATE_HDF5_CHECK(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL), what);
  // Metadata is read once and broadcast, and written collectively, instead
  // of every rank hitting the file system for it.
  ACCELERATE_HDF5_CHECK(H5Pset_all_coll_metadata_ops(fapl.get(), true), what);
  ACCELERATE_HDF5_CHECK(H5Pset_coll_metadata_write(fapl.get(), true), what);
  // Format of HDF5 1.8+ (compact groups, faster attribute access); h5py and the 1.10 tools read it.
  ACCELERATE_HDF5_CHECK(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST), what);
  return fapl;
}

}  // namespace

File create_parallel_file(MPI_Comm comm, const std::filesystem::path& path, const ParallelFileOptions& options,
                          std::chrono::milliseconds limit) {
  const std::string what = path.string();
  // From the file-access list on: H5Pset_fapl_mpio duplicates the
  // communicator, itself a collective that a dead rank leaves unfinished.
  const accelerate::detail::BlockingCallWatchdog watchdog("checkpoint: H5Fcreate of '" + what + "'", limit);
  PropertyList fapl = file_access(comm, what);
  // Large datasets start on file-system block boundaries, so that the ranks'
  // shares (multiples of 1 MiB of data) do not share blocks. The writer does
  // not know the state's size when it creates the file, so the threshold
  // bounds each dataset's padding by its own size instead: aligning every
  // dataset of 64 KiB or more to 1 MiB made a 1.2 MiB model a 13.7 MB file.
  ACCELERATE_HDF5_CHECK(H5Pset_alignment(fapl.get(), alignment_threshold(options.alignment), options.alignment), what);
  // Metadata is gathered into blocks rather than scattered small writes. The
  // last block's unused tail stays in the file: 64 KiB keeps that constant
  // small, and the metadata of a thousand datasets (a few hundred KiB) still
  // fills only a few blocks, written in the one collective metadata flush.
  ACCELERATE_HDF5_CHECK(H5Pset_meta_block_size(fapl.get(), kMetadataBlockSize), what);
  return File(H5Fcreate(what.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), what);
}

File open_parallel_file(MPI_Comm comm, const std::filesystem::path& path, std::chrono::milliseconds limit) {
  const std::string what = path.string();
  const accelerate::detail::BlockingCallWatchdog watchdog("checkpoint: H5Fopen of '" + what + "'", limit);
  PropertyList fapl = file_access(comm, what);
  return File(H5Fopen(what.c_str(), H5F_ACC_RDONLY, fapl.get()), what);
}

void close_parallel_file(File& file, MPI_Comm comm, std::chrono::milliseconds limit, std::string_view what) {
  if (!file.valid()) return;
  if (accelerate::detail::is_abandoned(comm)) {
    file.release();
    return;
  }
  const accelerate::detail::BlockingCallWatchdog watchdog("checkpoint: H5Fclose of '" + std::string(what) + "'", limit);
  file.close(what);
}

void close_parallel_file_quietly(File& file, MPI_Comm comm, std::chrono::milliseconds limit,
                                 std::string_view what) noexcept {
  try {
    close_parallel_file(file, comm, limit, what);
  } catch (...) {
    file.release();  // a failed H5Fclose has already released what it could
  }
}

PropertyList collective_transfer(bool two_phase) {
  PropertyList dxpl(H5Pcreate(H5P_DATASET_XFER), "transfer property list");
  ACCELERATE_HDF5_CHECK(H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE), "transfer property list");
  if (!two_phase) {
    ACCELERATE_HDF5_CHECK(H5Pset_dxpl_mpio_collective_opt(dxpl.get(), H5FD_MPIO_INDIVIDUAL_IO),
                          "transfer property list");
  }
  return dxpl;
}

}  // namespace accelerate::checkpoint::detail
