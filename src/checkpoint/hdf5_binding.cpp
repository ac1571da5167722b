#include "checkpoint/hdf5_binding.hpp"

#include <dlfcn.h>
#include <hdf5.h>

#include <string>

#include "accelerate/error.hpp"

namespace accelerate::checkpoint::detail {
namespace {

std::string object_of(const void* address) {
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return {};
  return info.dli_fname;
}

// The addresses as this library's relocations resolved them.
struct Bindings {
  std::string create;
  std::string mpio;
  std::string properties;
};

const Bindings& bindings() {
  static const Bindings result{object_of(reinterpret_cast<const void*>(&H5Fcreate)),
                               object_of(reinterpret_cast<const void*>(&H5Pset_fapl_mpio)),
                               object_of(reinterpret_cast<const void*>(&H5Pcreate))};
  return result;
}

}  // namespace

const char* hdf5_library_path() { return bindings().create.c_str(); }

void require_single_parallel_hdf5() {
  static const bool checked = [] {
    const Bindings& b = bindings();
    if (b.create != b.mpio || b.create != b.properties) {
      throw Hdf5Error(
          "checkpoint: the HDF5 functions used by Accelerate-HPC come from different libraries "
          "(H5Fcreate from '" +
          b.create + "', H5Pset_fapl_mpio from '" + b.mpio + "', H5Pcreate from '" + b.properties +
          "'). A serial HDF5 without symbol versions was loaded before the parallel one. Link "
          "the parallel HDF5 before LibTorch (or LD_PRELOAD it), or use an HDF5 built with "
          "symbol versioning.");
    }
    return true;
  }();
  (void)checked;
}

}  // namespace accelerate::checkpoint::detail
