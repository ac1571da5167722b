// Whether ranks of a communicator share a physical GPU. NCCL refuses such a
// communicator ("Duplicate GPU detected"), so a group whose ranks share a GPU
// (more ranks than GPUs on a node) is created without NCCL: CPU collectives
// keep working over MPI, and a collective on a CUDA tensor fails with the
// reason instead of the whole group failing at creation.
#pragma once

#include <mpi.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace accelerate::detail {

/// The identity of GPU `device` on this host: "<host>/<PCI bus id>", so that
/// ranks with different CUDA_VISIBLE_DEVICES still compare physical GPUs.
std::string gpu_identity(int device);

/// From the GPU identity of every rank (index = rank): the first pair of
/// ranks that share one, described for an error message; nullopt when every
/// rank has a GPU of its own.
std::optional<std::string> describe_shared_gpus(const std::vector<std::string>& identities);

/// Collective over `comm`: describe_shared_gpus of the ranks' gpu_identity,
/// the same answer on every rank. Bounded by `timeout`.
std::optional<std::string> find_shared_gpus(MPI_Comm comm, int device, std::chrono::milliseconds timeout);

}  // namespace accelerate::detail
