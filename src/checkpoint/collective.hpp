// The few MPI steps the checkpoint code needs around its HDF5 calls: making
// sure all ranks describe the same dataset before a collective HDF5 call,
// agreeing on success, and combining per-rank checksums.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace accelerate::checkpoint::detail {

/// Throws CollectiveMismatch on every rank unless all ranks passed the same
/// `description`; the message lists each rank's description. `call` names
/// the operation. One small all-reduce when they agree.
void require_same_on_all_ranks(MPI_Comm comm, std::string_view description, std::string_view call);

/// True on every rank when `ok` holds on every rank.
bool all_ranks_agree(MPI_Comm comm, bool ok);

/// CRC-32C of the concatenation, in rank order, of every rank's share
/// (`crc` of `length` bytes on this rank). Collective.
std::uint32_t combine_crc_in_rank_order(MPI_Comm comm, std::uint32_t crc, std::uint64_t length);

/// Every rank's value of `value`, in rank order. Collective.
std::vector<std::int64_t> all_gather(MPI_Comm comm, std::int64_t value);

}  // namespace accelerate::checkpoint::detail
