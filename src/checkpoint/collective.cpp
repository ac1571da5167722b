#include "checkpoint/collective.hpp"

#include <algorithm>
#include <functional>
#include <vector>

#include "accelerate/error.hpp"
#include "detail/crc32c.hpp"

namespace accelerate::checkpoint::detail {
using accelerate::detail::crc32c_combine;

void require_same_on_all_ranks(const DeadlineComm& comm, std::string_view description, std::string_view call) {
  const std::string step = std::string(call) + " (checking that all ranks describe the same entry)";
  const std::uint64_t hash = std::hash<std::string_view>{}(description);
  // One all-reduce of (h, ~h) under MAX gives max(h) and ~min(h) on every
  // rank: all hashes agree exactly when those two are equal, and every rank
  // reaches the same verdict.
  std::uint64_t extremes[2] = {hash, ~hash};
  comm.all_reduce(extremes, 2, accelerate::detail::Reduce::Max, step);
  if (extremes[0] == ~extremes[1]) return;

  const int size = comm.size();
  const std::vector<int> lengths = comm.all_gather(static_cast<int>(description.size()), step);
  std::vector<int> offsets(static_cast<std::size_t>(size), 0);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[static_cast<std::size_t>(r)] = total;
    total += lengths[static_cast<std::size_t>(r)];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  comm.all_gather_bytes_v(description.data(), static_cast<int>(description.size()), all.data(), lengths.data(),
                          offsets.data(), step);
  std::string message = "checkpoint: ranks called " + std::string(call) +
                        " with different arguments; every rank must save the same entries in the same order:";
  for (int r = 0; r < size; ++r) {
    message += "\n  rank " + std::to_string(r) + ": " +
               all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                          static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)]));
  }
  throw CollectiveMismatch(message);
}

bool all_ranks_agree(const DeadlineComm& comm, bool ok, std::string_view step) {
  return comm.all_reduce(ok ? 1 : 0, accelerate::detail::Reduce::Min, step) == 1;
}

std::uint32_t combine_crc_in_rank_order(const DeadlineComm& comm, std::uint32_t crc, std::uint64_t length) {
  struct Share {
    std::uint64_t crc;
    std::uint64_t length;
  };
  const std::vector<Share> all =
      comm.all_gather(Share{crc, length}, "checkpoint: all-gather of the checksums of every rank's share");
  std::uint32_t combined = 0;
  for (const Share& share : all)
    combined = crc32c_combine(combined, static_cast<std::uint32_t>(share.crc), share.length);
  return combined;
}

std::vector<std::uint32_t> combine_copy_checksums(const DeadlineComm& comm, const std::vector<PieceChecksum>& mine,
                                                  std::int64_t total, std::size_t element_size,
                                                  std::string_view where) {
  static_assert(sizeof(PieceChecksum) == 3 * sizeof(std::int64_t), "gathered as plain bytes");
  const std::string step = "checkpoint: all-gather of the pieces of '" + std::string(where) + "'";
  const std::vector<int> counts = comm.all_gather(static_cast<int>(mine.size()), step);
  std::vector<int> bytes(counts.size()), displacements(counts.size());
  int at = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    bytes[r] = counts[r] * static_cast<int>(sizeof(PieceChecksum));
    displacements[r] = at;
    at += bytes[r];
  }
  std::vector<PieceChecksum> all(static_cast<std::size_t>(at) / sizeof(PieceChecksum));
  comm.all_gather_bytes_v(mine.data(), static_cast<int>(mine.size() * sizeof(PieceChecksum)), all.data(), bytes.data(),
                          displacements.data(), step);
  std::sort(all.begin(), all.end(), [](const PieceChecksum& a, const PieceChecksum& b) {
    return a.copy != b.copy ? a.copy < b.copy : a.offset < b.offset;
  });
  // Each copy on its own: its pieces, in element order, must tile [0, total).
  std::vector<std::uint32_t> checksums;
  auto piece = all.begin();
  do {
    const std::int32_t copy = piece != all.end() ? piece->copy : 0;
    const std::string which =
        copy == 0 && (all.empty() || all.back().copy == 0) ? std::string() : " (copy " + std::to_string(copy) + ")";
    std::uint32_t combined = 0;
    std::int64_t next = 0;  // the first element no piece of this copy has covered yet
    for (; piece != all.end() && piece->copy == copy; ++piece) {
      if (piece->count == 0) continue;
      if (piece->offset != next) {
        throw ConfigError("checkpoint: the ranks' pieces of '" + std::string(where) + "'" + which + " must cover its " +
                          std::to_string(total) + " elements exactly once, but " +
                          (piece->offset > next ? "elements " + std::to_string(next) + " to " +
                                                      std::to_string(piece->offset - 1) + " are in no piece"
                                                : "element " + std::to_string(piece->offset) + " is in two pieces") +
                          ".");
      }
      combined = crc32c_combine(combined, piece->crc, static_cast<std::uint64_t>(piece->count) * element_size);
      next = piece->offset + piece->count;
    }
    if (next != total) {
      throw ConfigError(
          "checkpoint: the ranks' pieces of '" + std::string(where) + "'" + which + " must cover its " +
          std::to_string(total) + " elements exactly once, but they " +
          (next > total ? "reach element " + std::to_string(next - 1) : "end at element " + std::to_string(next)) +
          ".");
    }
    checksums.push_back(combined);
  } while (piece != all.end());
  return checksums;
}

std::uint32_t combine_piece_checksums(const DeadlineComm& comm, const std::vector<PieceChecksum>& mine,
                                      std::int64_t total, std::size_t element_size, std::string_view where) {
  return combine_copy_checksums(comm, mine, total, element_size, where).front();
}

std::vector<std::int64_t> all_gather(const DeadlineComm& comm, std::int64_t value, std::string_view step) {
  return comm.all_gather(value, step);
}

}  // namespace accelerate::checkpoint::detail
