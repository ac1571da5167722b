// Guard against two HDF5 libraries in one process.
//
// Debian's LibTorch 1.13 pulls in the serial HDF5 (libhdf5_serial, through
// libgdal/libnetcdf/OpenCV), while checkpoints need the MPI build
// (libhdf5_openmpi or libhdf5_mpich). Both export the same function and
// variable names. Debian versions them (HDF5_SERIAL_1.8.7 vs HDF5_MPI_1.8.7),
// so the references of this library, which name the MPI version, bind to
// the MPI build whatever the load order (checked with LD_DEBUG=bindings).
// Builds of HDF5 without symbol versions (Spack, source builds) are safe
// only while the MPI build comes first in the process's lookup order, which
// holds when it is a direct dependency of this library and no unversioned
// serial HDF5 was loaded earlier (e.g. by a dlopen()ing host). If it does
// not hold, H5Fcreate would run in the serial library with a file-access
// list made by the MPI one: garbage or a crash. We detect that case up front
// and refuse with an explanation instead.
#pragma once

namespace accelerate::checkpoint::detail {

/// Throws Hdf5Error when the HDF5 calls this library makes do not all land
/// in one parallel HDF5 library. Cheap after the first call.
void require_single_parallel_hdf5();

/// Path of the shared object that provides H5Fcreate to this library
/// ("" when it cannot be told, e.g. static linking).
const char* hdf5_library_path();

}  // namespace accelerate::checkpoint::detail
