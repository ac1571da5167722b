// The reader's fast path for replicated entries whose bytes sit in the file
// exactly as they sit in memory (contiguous layout, no filters, no type
// conversion): a whole batch of them is read at the datasets' file offsets,
// straight into the destination memory, and checksummed chunk by chunk
// while the data is still in cache. A rank that owns several cores reads
// its part with that many threads, each taking one contiguous stretch.
//
// The batch, taken in file order, is cut into one contiguous byte range per
// rank; each rank reads its range as one sequential stretch of the file and
// checksums it, and one all-gather of the checksums verifies every byte.
// The ranges then reach every rank in one of two ways (Spread):
//  - PageCache, when all ranks run on one host: each rank also reads the
//    other ranges from the file. The host's page cache holds them once
//    (a node-mate has just read them, or is reading them), so this costs a
//    memory copy and no extra file traffic, with no rank waiting on another.
//  - Broadcast, across hosts: the rank that read a range broadcasts it, so
//    the file is read once however many nodes load it.
// With one rank, or (Broadcast) a batch below the split threshold, every
// rank reads and checksums the whole batch itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "detail/deadline_comm.hpp"

namespace accelerate::checkpoint::detail {

struct DirectRead {
  std::uint64_t file_offset = 0;
  std::uint64_t bytes = 0;
  std::byte* destination = nullptr;  // `bytes` bytes of this rank's memory
  std::uint32_t stored_crc = 0;
};

/// How the ranks get the ranges the other ranks read and checksummed.
enum class Spread {
  PageCache,  // each rank reads them from the file too: one host's page cache serves them
  Broadcast,  // each range is broadcast by the rank that read it
};

struct DirectReadOptions {
  const accelerate::detail::DeadlineComm* comm = nullptr;  // the readers, and the deadline of their exchanges
  int fd = -1;      // the file, open for reading (POSIX reads: safe from several threads at any MPI thread level)
  int threads = 1;  // reading threads of this rank
  /// Broadcast only: a smaller batch is read and checksummed whole by every rank.
  std::uint64_t split_threshold = 0;
  bool verify_checksums = true;
  Spread spread = Spread::Broadcast;
};

/// Why an item failed: a checksum mismatch, or the file could not be read.
struct DirectReadFailure {
  std::size_t item = 0;
  std::uint32_t computed_crc = 0;
  /// Empty for a checksum mismatch; otherwise what went wrong while reading
  /// (only on the rank that saw it; others say so).
  std::string read_error;
};

/// Reads every item into its destination on every rank. Collective: all
/// ranks pass the same items (offsets and sizes) in the same order. Returns
/// the first failing item in `items` order, the same on every rank, or
/// nullopt when everything was read and matched its CRC-32C (the data of a
/// failing batch is unspecified).
std::optional<DirectReadFailure> read_direct(const DirectReadOptions& options, const std::vector<DirectRead>& items);

}  // namespace accelerate::checkpoint::detail
