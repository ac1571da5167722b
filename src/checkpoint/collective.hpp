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

/// A run of a dataset's flattened elements that this rank holds, with its CRC-32C.
struct PieceChecksum {
  std::int64_t offset = 0;  // first element
  std::int64_t count = 0;   // elements
  std::uint32_t crc = 0;    // CRC-32C of its bytes
  std::int32_t copy = 0;    // which copy of the dataset the piece is part of (replicated shards read it once per copy)
};

/// Gathers every rank's pieces of one dataset of `total` elements and
/// returns the dataset's CRC-32C, combined in element order. Throws
/// ConfigError on every rank, naming `where` and the first gap or overlap,
/// unless the pieces cover [0, total) exactly once. Collective.
std::uint32_t combine_piece_checksums(const DeadlineComm& comm, const std::vector<PieceChecksum>& mine,
                                      std::int64_t total, std::size_t element_size, std::string_view where);

/// As combine_piece_checksums, where the ranks' pieces form several copies of
/// the dataset, each covering it exactly once (ranks holding replicas of one
/// shard read it once per copy): the CRC-32C of every copy, in copy order,
/// the same on every rank. Collective.
std::vector<std::uint32_t> combine_copy_checksums(const DeadlineComm& comm, const std::vector<PieceChecksum>& mine,
                                                  std::int64_t total, std::size_t element_size, std::string_view where);

/// Every rank's value of `value`, in rank order. Collective.
std::vector<std::int64_t> all_gather(const DeadlineComm& comm, std::int64_t value, std::string_view step);

}  // namespace accelerate::checkpoint::detail
