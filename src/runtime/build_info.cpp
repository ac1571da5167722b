#include "accelerate/runtime/build_info.hpp"

#include <mpi.h>

#include "accelerate/config.hpp"
#include "accelerate/runtime/availability.hpp"

#if ACCELERATE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#if ACCELERATE_HAVE_NCCL
#include "detail/nccl_check.hpp"
#endif
#if ACCELERATE_HAVE_HDF5
#include "detail/hdf5_check.hpp"
#endif
#if ACCELERATE_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace accelerate {
namespace {

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<std::size_t>(length));
  // Keep the first line: Open MPI appends its repository and release date.
  version = version.substr(0, version.find_first_of("\n,"));
  while (!version.empty() && (version.back() == ' ' || version.back() == '\n')) version.pop_back();
  return version;
}

std::string mpi_standard() {
  int major = 0;
  int minor = 0;
  MPI_Get_version(&major, &minor);
  return "MPI " + std::to_string(major) + "." + std::to_string(minor) + " standard";
}

std::string dotted(int code, int major_div, int minor_div, int minor_mod) {
  return std::to_string(code / major_div) + "." + std::to_string(code / minor_div % minor_mod);
}

[[maybe_unused]] ComponentInfo off(std::string name, std::string switch_name) {
  return {std::move(name), false, "", "not built (-DACCELERATE_WITH_" + switch_name + "=ON to enable)"};
}

}  // namespace

std::vector<ComponentInfo> build_components() {
  std::vector<ComponentInfo> components;
  components.push_back({"Accelerate-HPC", true, config::version, "C++20"});
  components.push_back(
      {"LibTorch", true, torch_version(), config::torch_has_cuda ? "built with CUDA" : "CPU-only build"});
  components.push_back({"MPI", true, mpi_library_version(), mpi_standard()});

#if ACCELERATE_HAVE_HDF5
  components.push_back({"HDF5", true, std::string(detail::hdf5_runtime_version()), "parallel (MPI-IO)"});
#else
  components.push_back(off("HDF5", "HDF5"));
#endif

#if ACCELERATE_HAVE_CUDA
  {
    int runtime = 0;
    int driver = 0;
    cudaRuntimeGetVersion(&runtime);
    const bool has_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0;
    cudaGetLastError();
    components.push_back({"CUDA", true, dotted(runtime, 1000, 10, 100),
                          has_driver ? "driver " + dotted(driver, 1000, 10, 100) : "no CUDA driver on this host"});
  }
#else
  components.push_back(off("CUDA", "CUDA"));
#endif

#if ACCELERATE_HAVE_NCCL
  components.push_back({"NCCL", true, detail::nccl_runtime_version(), ""});
#else
  components.push_back(off("NCCL", "NCCL"));
#endif

#if ACCELERATE_HAVE_KOKKOS
  components.push_back({"Kokkos", true, config::built_with_kokkos, "header-only interop (accelerate_kokkos)"});
#else
  components.push_back(off("Kokkos", "KOKKOS"));
#endif

#if ACCELERATE_HAVE_HWLOC
  {
    // The run-time query only knows the API level; the release comes from the header.
    const unsigned api = hwloc_get_api_version();
    components.push_back(
        {"hwloc", true, HWLOC_VERSION, "API " + std::to_string(api >> 16) + "." + std::to_string((api >> 8) & 0xff)});
  }
#else
  components.push_back(off("hwloc", "HWLOC"));
#endif

#if ACCELERATE_HAVE_TENSORBOARD
  components.push_back({"TensorBoard", true, "protobuf " ACCELERATE_PROTOBUF_VERSION, "event files (protobuf-lite)"});
#else
  components.push_back(off("TensorBoard", "TENSORBOARD"));
#endif
  return components;
}

}  // namespace accelerate
