#include "checkpoint/direct_read.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>

#include "accelerate/error.hpp"
#include "detail/crc32c.hpp"

namespace accelerate::checkpoint::detail {
using accelerate::detail::crc32c;
using accelerate::detail::crc32c_combine;

namespace {

using accelerate::detail::DeadlineComm;

constexpr std::string_view kVerdict =
    "the checksum exchange of a checkpoint load (every rank of the reader's communicator must load the same "
    "entries)";

// Reads and checksums go in chunks small enough to still be in the cache
// when the checksum runs over them right after the read.
constexpr std::uint64_t kChunk = std::uint64_t{1} << 20;
// Rank ranges and thread parts start on multiples of this many bytes of the batch.
constexpr std::uint64_t kRangeGranule = std::uint64_t{1} << 20;
// Largest broadcast: keeps every count and datatype size far below INT_MAX.
constexpr std::uint64_t kMaxBroadcast = std::uint64_t{1} << 29;

// `bytes` bytes of item `item`, from byte `begin` of the item; checksummed or not.
struct Piece {
  std::size_t item;
  std::uint64_t begin;
  std::uint64_t bytes;
  bool checksum = false;
};

struct PieceResult {
  std::uint32_t crc = 0;
  std::string error;  // non-empty when the read failed
};

// Reads one piece into its destination, checksumming each chunk right after
// it arrives. Failures are returned, not thrown: the other ranks are about
// to enter a collective and must learn about it there.
PieceResult read_piece(int fd, const DirectRead& item, const Piece& piece) {
  PieceResult result;
  std::byte* out = item.destination + piece.begin;
  const std::uint64_t offset = item.file_offset + piece.begin;
  for (std::uint64_t done = 0; done < piece.bytes;) {
    const std::uint64_t want = std::min(kChunk, piece.bytes - done);
    const ssize_t got = ::pread(fd, out + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      result.error = "reading at byte " + std::to_string(offset + done) + " failed: " + std::strerror(errno);
      return result;
    }
    if (got == 0) {
      result.error = "the file ends at byte " + std::to_string(offset + done) + ", before the dataset does (" +
                     std::to_string(piece.bytes - done) + " bytes missing; truncated copy?)";
      return result;
    }
    if (piece.checksum) result.crc = crc32c(out + done, static_cast<std::size_t>(got), result.crc);
    done += static_cast<std::uint64_t>(got);
  }
  return result;
}

// Cuts `pieces` (in order) into `parts` runs of about equal bytes, at granule
// multiples, splitting pieces where a run ends.
std::vector<std::vector<Piece>> cut_into_parts(const std::vector<Piece>& pieces, int parts) {
  std::uint64_t total = 0;
  for (const Piece& piece : pieces) total += piece.bytes;
  const std::uint64_t granules = (total + kRangeGranule - 1) / kRangeGranule;
  const auto count = static_cast<std::uint64_t>(std::max(1, parts));
  std::vector<std::vector<Piece>> result(static_cast<std::size_t>(count));
  std::uint64_t position = 0;
  for (const Piece& piece : pieces) {
    for (std::uint64_t done = 0; done < piece.bytes;) {
      // The part holding `position`, and where that part ends.
      std::uint64_t part = count - 1;
      while (part > 0 && std::min(total, granules * part / count * kRangeGranule) > position) --part;
      const std::uint64_t end = std::min(total, granules * (part + 1) / count * kRangeGranule);
      const std::uint64_t take = std::min(piece.bytes - done, end - position);
      result[static_cast<std::size_t>(part)].push_back({piece.item, piece.begin + done, take, piece.checksum});
      done += take;
      position += take;
    }
  }
  return result;
}

// Reads every piece with `threads` threads, each taking one contiguous run.
// Returns the results in the order of `pieces` as cut, with that cut.
struct ReadOutcome {
  std::vector<Piece> pieces;  // as read: `pieces`, some of them split
  std::vector<PieceResult> results;
};
ReadOutcome read_pieces(int fd, const std::vector<DirectRead>& items, const std::vector<Piece>& pieces, int threads) {
  const auto parts = cut_into_parts(pieces, threads);
  std::vector<std::vector<PieceResult>> results(parts.size());
  auto run = [&](std::size_t part) {
    for (const Piece& piece : parts[part]) {
      results[part].push_back(read_piece(fd, items[piece.item], piece));
      if (!results[part].back().error.empty()) return;  // the rest of this run is likely unreadable too
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t part = 1; part < parts.size(); ++part) {
    if (!parts[part].empty()) workers.emplace_back(run, part);
  }
  run(0);
  for (std::thread& worker : workers) worker.join();
  ReadOutcome outcome;
  for (std::size_t part = 0; part < parts.size(); ++part) {
    outcome.pieces.insert(outcome.pieces.end(), parts[part].begin(),
                          parts[part].begin() + static_cast<std::ptrdiff_t>(results[part].size()));
    outcome.results.insert(outcome.results.end(), results[part].begin(), results[part].end());
  }
  return outcome;
}

// This rank's record of a batch: the CRC and length of the bytes it
// checksummed of each item, and the first item it could not read.
struct LocalRecord {
  std::vector<std::uint64_t> values;  // crc, length per item; then the first unreadable item
  std::string read_error;             // why that item could not be read

  explicit LocalRecord(std::size_t items) : values(2 * items + 1, 0) { values.back() = items; }
  [[nodiscard]] std::uint64_t unreadable() const { return values.back(); }

  // Pieces of an item arrive in byte order, so the CRCs chain with the combination rule.
  void add(const ReadOutcome& outcome) {
    for (std::size_t k = 0; k < outcome.results.size(); ++k) {
      const Piece& piece = outcome.pieces[k];
      const PieceResult& result = outcome.results[k];
      if (!result.error.empty()) {
        if (piece.item < values.back()) {
          values.back() = piece.item;
          read_error = result.error;
        }
      } else if (piece.checksum) {
        auto& crc = values[2 * piece.item];
        crc = crc32c_combine(static_cast<std::uint32_t>(crc), result.crc, piece.bytes);
        values[2 * piece.item + 1] += piece.bytes;
      }
    }
  }
};

struct Span {
  std::byte* data;
  std::uint64_t bytes;
};

// Broadcasts the memory `pieces` (the same lengths on every rank) from
// `root`, at most kMaxBroadcast bytes per call (several pieces at once).
void broadcast_pieces(const DeadlineComm& comm, int root, const std::vector<Span>& pieces) {
  std::vector<DeadlineComm::Span> group;
  std::uint64_t group_bytes = 0;
  auto flush = [&] {
    comm.broadcast_spans(group, root, "checkpoint load (broadcast of rank " + std::to_string(root) + "'s reads)");
    group.clear();
    group_bytes = 0;
  };
  for (const Span& piece : pieces) {
    for (std::uint64_t done = 0; done < piece.bytes;) {
      const std::uint64_t take = std::min(piece.bytes - done, kMaxBroadcast - group_bytes);
      group.push_back({piece.data + done, static_cast<int>(take)});
      group_bytes += take;
      done += take;
      if (group_bytes == kMaxBroadcast) flush();
    }
  }
  flush();
}

// The batch laid end to end in file order, cut into `ranges` ranges at
// granule multiples: which pieces of which items range r holds.
class BatchRanges {
 public:
  BatchRanges(const std::vector<DirectRead>& items, int ranges) : ranges_(static_cast<std::uint64_t>(ranges)) {
    order_.resize(items.size());
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    std::stable_sort(order_.begin(), order_.end(),
                     [&](std::size_t a, std::size_t b) { return items[a].file_offset < items[b].file_offset; });
    start_.resize(items.size());
    for (const std::size_t i : order_) {
      start_[i] = total_;
      total_ += items[i].bytes;
    }
    bytes_.resize(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) bytes_[i] = items[i].bytes;
  }

  [[nodiscard]] std::vector<Piece> pieces_of(int range, bool checksum) const {
    const std::uint64_t granules = (total_ + kRangeGranule - 1) / kRangeGranule;
    auto bound = [&](std::uint64_t r) {
      return r >= ranges_ ? total_ : std::min(total_, granules * r / ranges_ * kRangeGranule);
    };
    const std::uint64_t lo = bound(static_cast<std::uint64_t>(range));
    const std::uint64_t hi = bound(static_cast<std::uint64_t>(range) + 1);
    std::vector<Piece> pieces;
    for (const std::size_t i : order_) {
      const std::uint64_t begin = std::max(lo, start_[i]);
      const std::uint64_t end = std::min(hi, start_[i] + bytes_[i]);
      if (begin < end) pieces.push_back({i, begin - start_[i], end - begin, checksum});
    }
    return pieces;
  }

 private:
  std::uint64_t ranges_;
  std::vector<std::size_t> order_;    // item indices in file order
  std::vector<std::uint64_t> start_;  // position of each item in the batch
  std::vector<std::uint64_t> bytes_;
  std::uint64_t total_ = 0;
};

// The smallest of every rank's `value`. Ranks that finish reading first
// wait here for the slowest, yielding their core between polls.
std::uint64_t agree_on_minimum(const DirectReadOptions& options, std::uint64_t value) {
  return options.comm->all_reduce(value, accelerate::detail::Reduce::Min, kVerdict);
}

// Every rank's `values` (the same count everywhere), rank after rank. The
// checksum record of a batch is small: two numbers per item.
std::vector<std::uint64_t> gather_all(const DirectReadOptions& options, const std::vector<std::uint64_t>& values) {
  std::vector<std::uint64_t> all(values.size() * static_cast<std::size_t>(options.comm->size()));
  options.comm->all_gather_bytes(values.data(), static_cast<int>(values.size() * sizeof(std::uint64_t)), all.data(),
                                 kVerdict);
  return all;
}

// Every rank reads and checksums every item: no data exchange, one agreement on the verdict.
std::optional<DirectReadFailure> read_everything(const DirectReadOptions& options,
                                                 const std::vector<DirectRead>& items) {
  const BatchRanges batch(items, 1);
  LocalRecord record(items.size());
  record.add(read_pieces(options.fd, items, batch.pieces_of(0, options.verify_checksums), options.threads));
  std::uint64_t first_bad = record.unreadable();  // a read failure leaves later items unread: no CRC verdict
  for (std::size_t i = 0; i < items.size() && first_bad == items.size() && options.verify_checksums; ++i) {
    if (record.values[2 * i] != items[i].stored_crc) first_bad = i;
  }
  first_bad = agree_on_minimum(options, first_bad);
  if (first_bad == items.size()) return std::nullopt;
  DirectReadFailure failure{first_bad, static_cast<std::uint32_t>(record.values[2 * first_bad]), {}};
  if (record.unreadable() == first_bad) {
    failure.read_error = record.read_error;
  } else if (record.unreadable() != items.size() || failure.computed_crc == items[first_bad].stored_crc) {
    failure.read_error = "another rank could not read it or found its checksum wrong (see that rank's error)";
  }
  return failure;
}

}  // namespace

std::optional<DirectReadFailure> read_direct(const DirectReadOptions& options, const std::vector<DirectRead>& items) {
  const int rank = options.comm->rank();
  const int size = options.comm->size();
  std::uint64_t total = 0;
  for (const DirectRead& item : items) total += item.bytes;
  if (size == 1 || (options.spread == Spread::Broadcast && total < options.split_threshold)) {
    return read_everything(options, items);
  }

  // Read and checksum this rank's range; with PageCache also the others,
  // starting with the next rank's: while the file is cold, the ranks' first
  // reads go to different parts of it and each then follows a neighbour
  // whose pages are arriving or have arrived.
  const BatchRanges batch(items, size);
  std::vector<Piece> pieces = batch.pieces_of(rank, options.verify_checksums);
  if (options.spread == Spread::PageCache) {
    for (int step = 1; step < size; ++step) {
      const auto others = batch.pieces_of((rank + step) % size, false);
      pieces.insert(pieces.end(), others.begin(), others.end());
    }
  }
  LocalRecord record(items.size());
  record.add(read_pieces(options.fd, items, pieces, options.threads));

  // One exchange of every checksum of the batch.
  const std::size_t n = items.size();
  const std::vector<std::uint64_t> all = gather_all(options, record.values);
  auto at = [&](int r, std::size_t k) { return all[static_cast<std::size_t>(r) * record.values.size() + k]; };
  std::uint64_t unreadable = n;
  for (int r = 0; r < size; ++r) unreadable = std::min(unreadable, at(r, 2 * n));
  if (unreadable < n) {
    return DirectReadFailure{static_cast<std::size_t>(unreadable), 0,
                             record.unreadable() == unreadable
                                 ? record.read_error
                                 : "another rank could not read it (see that rank's error)"};
  }
  for (std::size_t i = 0; i < n && options.verify_checksums; ++i) {
    std::uint32_t combined = 0;
    for (int r = 0; r < size; ++r) {
      combined = crc32c_combine(combined, static_cast<std::uint32_t>(at(r, 2 * i)), at(r, 2 * i + 1));
    }
    if (combined != items[i].stored_crc) return DirectReadFailure{i, combined, {}};
  }
  if (options.spread == Spread::PageCache) return std::nullopt;

  // Every rank receives the ranges the others read.
  for (int r = 0; r < size; ++r) {
    std::vector<Span> spans;
    for (const Piece& piece : batch.pieces_of(r, false)) {
      spans.push_back({items[piece.item].destination + piece.begin, piece.bytes});
    }
    broadcast_pieces(*options.comm, r, spans);
  }
  return std::nullopt;
}

}  // namespace accelerate::checkpoint::detail
