#include "runtime/numa_affinity_gpu.hpp"

#include "accelerate/config.hpp"
#if ACCELERATE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "detail/cuda_check.hpp"
#endif

namespace accelerate::detail {

std::vector<std::string> visible_gpu_pci_bus_ids() {
  std::vector<std::string> ids;
#if ACCELERATE_HAVE_CUDA
  int count = 0;
  // No driver or no device is not an error here: the ranks run on CPUs.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return ids;
  }
  for (int device = 0; device < count; ++device) {
    char bus_id[32] = {};
    ACCELERATE_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device));
    ids.emplace_back(bus_id);
  }
#endif
  return ids;
}

}  // namespace accelerate::detail
