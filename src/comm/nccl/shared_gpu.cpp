#include "comm/nccl/shared_gpu.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <cstring>
#include <map>

#include "detail/host_name.hpp"
#include "detail/mpi_check.hpp"
#include "detail/mpi_wait.hpp"

namespace accelerate::detail {
namespace {
constexpr std::size_t kIdentityBytes = 128;
}  // namespace

std::string gpu_identity(int device) {
  std::array<char, 32> bus{};
  if (cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), device) != cudaSuccess) {
    (void)cudaGetLastError();  // later, unrelated calls must not report it
    // Without a bus id the device index is the best this rank can say.
    return short_hostname() + "/cuda:" + std::to_string(device);
  }
  return short_hostname() + "/" + bus.data();
}

std::optional<std::string> describe_shared_gpus(const std::vector<std::string>& identities) {
  std::map<std::string, int> first_rank;
  for (int rank = 0; rank < static_cast<int>(identities.size()); ++rank) {
    const auto& identity = identities[static_cast<std::size_t>(rank)];
    const auto [seen, inserted] = first_rank.emplace(identity, rank);
    if (!inserted) {
      const auto slash = identity.find('/');
      return "ranks " + std::to_string(seen->second) + " and " + std::to_string(rank) + " share the GPU " +
             identity.substr(slash + 1) + " on host " + identity.substr(0, slash) +
             ", and NCCL needs a GPU of its own for every rank, so collectives on CUDA tensors are not "
             "available in this group (CPU tensors still go over MPI). Start one rank per GPU (mpirun "
             "-npernode <GPUs per node>, srun --ntasks-per-node=<GPUs per node>), or keep the tensors on the "
             "CPU (ACCELERATE_USE_CPU=1).";
    }
  }
  return std::nullopt;
}

std::optional<std::string> find_shared_gpus(MPI_Comm comm, int device, std::chrono::milliseconds timeout) {
  int size = 1;
  ACCELERATE_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::array<char, kIdentityBytes> mine{};
  const std::string identity = gpu_identity(device);
  std::memcpy(mine.data(), identity.data(), std::min(identity.size(), mine.size() - 1));
  std::vector<char> all(kIdentityBytes * static_cast<std::size_t>(size));
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Iallgather(mine.data(), static_cast<int>(kIdentityBytes), MPI_CHAR, all.data(),
                                      static_cast<int>(kIdentityBytes), MPI_CHAR, comm, &request));
  wait_with_timeout(request, timeout, "NCCL set-up: MPI_Iallgather of the ranks' GPUs", comm);
  std::vector<std::string> identities;
  for (int rank = 0; rank < size; ++rank)
    identities.emplace_back(all.data() + kIdentityBytes * static_cast<std::size_t>(rank));
  return describe_shared_gpus(identities);
}

}  // namespace accelerate::detail
