// The few MPI steps the checkpoint code needs around its HDF5 calls: making
// sure all ranks describe the same dataset before a collective HDF5 call,
// agreeing on success, and combining per-rank checksums. Each runs through
// DeadlineComm, so a rank that never arrives is named, not waited for.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "detail/deadline_comm.hpp"

namespace accelerate::checkpoint::detail {

using accelerate::detail::DeadlineComm;

/// Throws CollectiveMismatch on every rank unless all ranks passed the same
/// `description`; the message lists each rank's description. `call` names
/// the operation. One small all-reduce when they agree.
void require_same_on_all_ranks(const DeadlineComm& comm, std::string_view description, std::string_view call);

/// True on every rank when `ok` holds on every rank; `step` names the step in a TimeoutError.
bool all_ranks_agree(const DeadlineComm& comm, bool ok, std::string_view step);

/// CRC-32C of the concatenation, in rank order, of every rank's share
/// (`crc` of `length` bytes on this rank). Collective.
std::uint32_t combine_crc_in_rank_order(const DeadlineComm& comm, std::uint32_t crc, std::uint64_t length);

/// Every rank's value of `value`, in rank order. Collective.
std::vector<std::int64_t> all_gather(const DeadlineComm& comm, std::int64_t value, std::string_view step);

}  // namespace accelerate::checkpoint::detail
