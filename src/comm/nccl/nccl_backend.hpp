// NcclBackend factory: collectives on CUDA tensors over an NCCL communicator
// bootstrapped through MPI. Compiled only when the NCCL feature is on.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "accelerate/comm/backend.hpp"
#include "comm/timeout_policy.hpp"

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

/// The NCCL backend of a sub-group of the group whose NCCL backend is
/// `parent`. Collective over that parent group: `parent_comm` is an MPI
/// communicator of its ranks, `member_comm` the sub-group's MPI communicator
/// (MPI_COMM_NULL on ranks outside it), whose rank order the sub-group
/// keeps. The ranks agree on one method: ncclCommSplit of the parent's
/// communicator when choose_nccl_split_method() allows it on every rank and
/// the parent is intact, otherwise the members bootstrap a communicator over
/// `member_comm`. Returns nullptr outside the sub-group.
std::unique_ptr<Backend> split_nccl_backend(Backend& parent, MPI_Comm parent_comm, MPI_Comm member_comm,
                                            std::string group, TimeoutPolicy policy);

}  // namespace accelerate::detail
