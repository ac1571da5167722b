// CheckpointWriter: writes one checkpoint file collectively through MPI-IO.
//
// Every member function is collective over the writer's communicator: all
// ranks call the same functions with the same names, dtypes and shapes, in
// the same order (checked: a mismatch throws CollectiveMismatch on every
// rank, listing each rank's view). Tensors are written as soon as they are
// passed, straight from their storage; nothing is buffered, so the extra
// memory of a save is independent of the state's size.
//
//   CheckpointWriter writer({.comm = comm, .file = dir / "state.h5"}, {.step = 100});
//   writer.write_replicated("pytorch_model/fc.weight", weight);   // same on every rank
//   writer.write_per_rank("random_states/torch", rng_state);       // one row per rank
//   writer.set_attribute("scheduler", "state", json_text);
//   writer.close();
//
// Names are paths relative to the root ("group/sub/name"); missing groups are
// created. Each dataset carries a `dtype` and a `crc32c` attribute (see
// docs/checkpoint-format.md).
//
// The communicators of the options are CommHandles (runtime/comm_handle.hpp):
// set them from an MPI_Comm where accelerate/runtime/mpi_comm.hpp is included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "accelerate/checkpoint/attribute_value.hpp"
#include "accelerate/checkpoint/tensor_piece.hpp"
#include "accelerate/runtime/comm_handle.hpp"

namespace accelerate::checkpoint {

struct WriterOptions {
  /// The ranks writing this file (the world, or a node's ranks with
  /// save_on_each_node). Not freed by the writer. Default MPI_COMM_WORLD.
  CommHandle comm;
  std::filesystem::path file;
  /// Recorded in the root attributes.
  int num_nodes = 1;
  int node_index = 0;
  /// Replicated tensors of at least this many bytes are split across the
  /// ranks; smaller ones are written whole by one rank, chosen to balance bytes.
  std::size_t split_threshold = std::size_t{1} << 20;
  /// Datasets of at least 16 × this many bytes (and 64 KiB) start at
  /// multiples of it (H5Pset_alignment); smaller ones are packed, so that
  /// the padding stays under 1/16 of the data (docs/checkpointing.md).
  std::size_t alignment = std::size_t{1} << 20;
  /// Collective (two-phase) MPI-IO for raw data. When false, HDF5 still
  /// issues the transfer collectively but lets each rank write its own
  /// contiguous share directly (H5FD_MPIO_INDIVIDUAL_IO), which avoids the
  /// aggregation buffers.
  bool two_phase_io = false;
  /// Deadline of each collective step outside HDF5; a rank that does not
  /// arrive in time becomes a TimeoutError naming it (save_state passes State::timeout()).
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  /// Called on every rank after each tensor or blob is written, with its
  /// whole size in bytes (not this rank's share): for progress displays.
  std::function<void(std::uint64_t bytes)> on_progress{};
};

/// Training-loop position recorded in the root attributes.
struct CheckpointInfo {
  std::int64_t step = 0;
  std::int64_t iteration = 0;
  std::string mixed_precision = "no";
};

class CheckpointWriter {
 public:
  /// Creates (truncates) options.file. Collective.
  CheckpointWriter(const WriterOptions& options, const CheckpointInfo& info);
  /// Closes the file if close() was not called; errors are swallowed here.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  /// A tensor that is identical on every rank. Large ones are split into
  /// contiguous shares of the flattened data, one per rank, so the write
  /// bandwidth grows with the number of ranks.
  void write_replicated(std::string_view name, const at::Tensor& tensor);

  /// A tensor of `dtype` and `shape` that no rank holds whole: each rank
  /// passes the pieces it holds (none is fine), and together they must cover
  /// the tensor exactly once (ConfigError on every rank otherwise, naming the
  /// gap or the overlap). The entry is an ordinary replicated dataset, read
  /// whole with read_replicated() or in any other cut with read_pieces().
  void write_pieces(std::string_view name, c10::ScalarType dtype, at::IntArrayRef shape,
                    std::vector<TensorPiece> pieces);

  /// This rank's value of a per-rank tensor: row `rank` of a dataset of
  /// shape [world_size, ...shape]. Shapes and dtypes must agree across ranks.
  void write_per_rank(std::string_view name, const at::Tensor& tensor);

  /// This rank's bytes of a per-rank blob whose length may differ across
  /// ranks (serialised RNG or loader states): a [world_size, max_length]
  /// uint8 dataset, zero padded, with the true lengths in a `lengths` attribute.
  void write_per_rank_bytes(std::string_view name, std::span<const std::byte> bytes);

  /// Attribute `name` on group `group` ("" = root; created when missing).
  /// Every rank must pass the same value.
  void set_attribute(std::string_view group, std::string_view name, const AttributeValue& value);

  /// Flushes and closes the file; throws when the data did not reach the
  /// file system. Collective.
  void close();

  /// Bytes of tensor data this rank wrote so far.
  [[nodiscard]] std::uint64_t bytes_written_locally() const noexcept;
  [[nodiscard]] const std::filesystem::path& file() const noexcept;
  /// Ranks writing this file together (the size of options.comm).
  [[nodiscard]] int size() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accelerate::checkpoint
