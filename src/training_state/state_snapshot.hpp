// StateSnapshot: a training state copied into host memory, as the writes that
// would have put it into the checkpoint file, in their order. The copy is
// what an asynchronous save blocks training for; the next steps may then
// change every tensor while a background thread replays the writes into the
// file. Its buffers are kept for the next snapshot, which reuses each one
// whose dtype and size still fit (pinned host memory for CUDA tensors, so
// that the copies run at the link's speed).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "training_state/state_writer.hpp"

namespace accelerate::checkpoint::detail {

class StateSnapshot final : public StateWriter {
 public:
  /// Starts a new snapshot for a file written by `file_ranks` ranks; the
  /// previous one's records are dropped, its buffers kept for reuse.
  void begin(int file_ranks);

  void write_replicated(std::string_view name, const at::Tensor& tensor) override;
  void write_pieces(std::string_view name, c10::ScalarType dtype, at::IntArrayRef shape,
                    std::vector<TensorPiece> pieces) override;
  void write_per_rank(std::string_view name, const at::Tensor& tensor) override;
  void set_attribute(std::string_view group, std::string_view name, const AttributeValue& value) override;
  [[nodiscard]] int size() const override { return file_ranks_; }

  /// Makes the same calls, in the same order, on `into`. Reads only the
  /// snapshot's own memory, so it may run on another thread.
  void replay(StateWriter& into) const;

  /// Bytes of tensor data in the snapshot; bytes of host memory it holds.
  [[nodiscard]] std::uint64_t staged_bytes() const noexcept { return staged_bytes_; }
  [[nodiscard]] std::uint64_t buffer_bytes() const noexcept;
  /// Buffers of this snapshot allocated rather than reused (for tests).
  [[nodiscard]] std::size_t buffers_allocated() const noexcept { return allocated_; }

 private:
  enum class Kind { Replicated, Pieces, PerRank, Attribute };
  struct Record {
    Record(Kind k, std::string_view n) : kind(k), name(n) {}
    Kind kind;
    std::string name;                                    // the entry; for an attribute, its group
    at::Tensor tensor;                                   // Replicated, PerRank
    c10::ScalarType dtype = c10::ScalarType::Undefined;  // Pieces
    std::vector<std::int64_t> shape;                     // Pieces
    std::vector<TensorPiece> pieces;                     // Pieces
    std::string attribute;                               // Attribute: its name
    AttributeValue value;                                // Attribute
  };

  /// A copy of `tensor` in the next reusable buffer.
  at::Tensor stage(const at::Tensor& tensor);

  int file_ranks_ = 1;
  std::vector<Record> records_;
  std::vector<at::Tensor> buffers_;  // in the order stage() used them
  std::size_t next_buffer_ = 0;
  std::size_t allocated_ = 0;
  std::uint64_t staged_bytes_ = 0;
};

}  // namespace accelerate::checkpoint::detail
