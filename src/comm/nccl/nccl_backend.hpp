// NcclBackend factory: collectives on CUDA tensors over an NCCL communicator
// bootstrapped through MPI. Compiled only when the NCCL feature is on.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "accelerate/comm/backend.hpp"
#include "comm/mpi/mpi_work.hpp"

namespace accelerate::detail {

/// Rank `root` of `comm` creates an NCCL unique id and MPI_Bcast shares it;
/// returns the same id on every rank. Works without a GPU.
ncclUniqueId exchange_nccl_unique_id(MPI_Comm comm, int root, std::chrono::milliseconds timeout);

/// The NCCL dtype of `type`; ConfigError when NCCL has none.
ncclDataType_t nccl_datatype(c10::ScalarType type);
/// The NCCL reduction of `op` (Avg is ncclAvg).
ncclRedOp_t nccl_reduction(ReduceOp op);

/// Creates the communicator eagerly on CUDA device `device` (collective over `comm`).
std::unique_ptr<Backend> make_nccl_backend(MPI_Comm comm, int device, std::string group, TimeoutPolicy policy);

}  // namespace accelerate::detail
