// CheckpointReader: reads a checkpoint file written by CheckpointWriter, on
// any number of ranks.
//
// Every member function is collective over the reader's communicator (HDF5
// reads metadata once and broadcasts it), so all ranks call the same
// functions with the same names in the same order.
//
// Replicated tensors are global: each rank reads a contiguous share, the
// shares are checksummed where they were read and exchanged, so every rank
// ends up with the whole tensor while the file is read only once. load_into()
// reads all its tensors as one batch (one share of the batch per rank, one
// checksum exchange; on one host each rank then reads the rest out of the
// page cache, across hosts each share is broadcast). Per-rank rows map to ranks by the rule of
// per_rank_source_row(). Every read is verified against the dataset's
// CRC-32C; a mismatch throws Hdf5Error naming the file and the dataset, on
// every rank.
//
// The communicators of the options are CommHandles (runtime/comm_handle.hpp):
// set them from an MPI_Comm where accelerate/runtime/mpi_comm.hpp is included.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "accelerate/checkpoint/attribute_value.hpp"
#include "accelerate/checkpoint/key_report.hpp"
#include "accelerate/checkpoint/tensor_piece.hpp"
#include "accelerate/runtime/comm_handle.hpp"

namespace accelerate::checkpoint {

/// How every rank gets the shares of a replicated batch the other ranks read and verified.
enum class ShareSpread {
  Auto,       ///< PageCache when all ranks of the communicator run on one host, else Broadcast
  PageCache,  ///< each rank reads them from the file as well, out of the host's page cache
  Broadcast,  ///< the rank that read a share broadcasts it (the file is read once in all)
};

struct ReaderOptions {
  /// The ranks reading this file. Default MPI_COMM_WORLD.
  CommHandle comm;
  std::filesystem::path file;
  /// Across hosts (Broadcast), reads (a tensor, or a load_into() batch)
  /// smaller than this are done whole by every rank (no broadcast); larger
  /// ones in shares that are then broadcast. Datasets HDF5 must convert use
  /// it on one host too.
  std::size_t split_threshold = std::size_t{1} << 20;
  bool verify_checksums = true;
  ShareSpread spread = ShareSpread::Auto;
  /// Threads with which each rank reads tensors stored as raw bytes; 0: as
  /// many as the cores the rank owns (its CPU affinity, or its share of the
  /// host's cores when ranks are not bound), at most 8.
  int read_threads = 0;
  /// How long a rank waits in each collective step of a load (outside
  /// HDF5) for the slowest rank before throwing TimeoutError, which names
  /// the ranks that never arrived (load_state passes State::timeout()).
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  /// A load_into() or read_replicated() of many tensors is read in batches
  /// of about this many bytes (a tensor larger than it is one batch), so
  /// that on_progress is called as the load goes.
  std::size_t batch_bytes = std::size_t{512} << 20;
  /// Called on every rank after each batch of replicated tensors and each
  /// per-rank row is read, with the bytes read: for progress displays.
  std::function<void(std::uint64_t bytes)> on_progress{};
};

enum class EntryKind { Replicated, PerRank, PerRankBytes };

struct EntryInfo {
  TensorSpec spec;  // for per-rank entries: the shape of one row
  EntryKind kind = EntryKind::Replicated;
  std::int64_t rows = 0;  // per-rank entries: the writer's world size
  std::uint32_t crc32c = 0;
};

/// Root attributes of a checkpoint.
struct CheckpointHeader {
  std::string format;
  std::int64_t format_version = 0;
  std::string library_version;
  std::string torch_version;
  std::int64_t world_size = 0;
  std::int64_t num_nodes = 0;
  std::int64_t node_index = 0;
  std::int64_t step = 0;
  std::int64_t iteration = 0;
  std::string mixed_precision;
  std::string created;
};

class CheckpointReader {
 public:
  /// Opens options.file read-only and indexes its entries. Collective.
  /// Throws Hdf5Error for a missing or foreign file, ConfigError for a newer format.
  explicit CheckpointReader(const ReaderOptions& options);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  [[nodiscard]] const CheckpointHeader& header() const noexcept;
  /// All tensor entries, sorted by name; `group` restricts to that group ("a/b").
  [[nodiscard]] std::vector<EntryInfo> entries(std::string_view group = {}) const;
  [[nodiscard]] bool contains(std::string_view name) const;
  /// Throws ConfigError naming the file when `name` is not an entry.
  [[nodiscard]] const EntryInfo& entry(std::string_view name) const;

  /// A replicated tensor, allocated on the CPU.
  at::Tensor read_replicated(std::string_view name);
  /// Several replicated tensors, allocated on the CPU and read as one batch
  /// (one checksum exchange for all of them), in the order of `names`.
  std::vector<at::Tensor> read_replicated(const std::vector<std::string>& names);
  /// Reads a replicated tensor into `destination` (contiguous CPU tensor of
  /// the stored dtype and shape; other devices are copied through the CPU).
  void read_replicated_into(std::string_view name, const at::Tensor& destination);

  /// Reads pieces of a replicated entry into the pieces' tensors (1-D, of
  /// the entry's dtype, any device): each rank its own cut, none is fine.
  /// The ranks' pieces must together cover the entry exactly once, which
  /// lets the checksum be verified (ConfigError on every rank otherwise).
  /// Where ranks hold replicas of one cut (a shard copied on every node),
  /// each set of ranks that covers the entry once passes its own `copy`
  /// index: every copy must cover it exactly once, and each is verified.
  void read_pieces(std::string_view name, std::vector<TensorPiece> pieces, int copy = 0);

  /// The row this rank reads from per-rank entries saved on `saved_world_size`
  /// ranks: its own rank when it existed, else rank % saved_world_size.
  [[nodiscard]] int per_rank_source_row() const;
  /// Row `row` (default: per_rank_source_row()) of a per-rank entry.
  at::Tensor read_per_rank(std::string_view name, int row = -1);
  std::vector<std::byte> read_per_rank_bytes(std::string_view name, int row = -1);

  /// Attribute of a group ("" = root); nullopt when absent.
  std::optional<AttributeValue> attribute(std::string_view group, std::string_view name);

  /// Reads the replicated entries of `group` into `destinations` (keys are
  /// names relative to the group). strict: any missing, unexpected or
  /// mis-shaped key throws ConfigError listing all of them, before anything
  /// is read. Non-strict: the matching keys are loaded and the rest reported.
  KeyReport load_into(std::string_view group, const std::map<std::string, at::Tensor>& destinations, bool strict);

  /// load_into()'s check alone: `expected` (names relative to the group)
  /// against the group's replicated entries; strict: ConfigError listing every
  /// problem. Reads nothing.
  KeyReport check_keys(std::string_view group, const std::vector<TensorSpec>& expected, bool strict);

  [[nodiscard]] const std::filesystem::path& file() const noexcept;
  /// Ranks reading this file together (the size of options.comm).
  [[nodiscard]] int size() const noexcept;
  /// Threads with which this rank reads (ReaderOptions::read_threads, resolved).
  [[nodiscard]] int read_threads() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accelerate::checkpoint
