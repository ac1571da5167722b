// Where a training state is written: straight into the checkpoint file
// (FileStateWriter, the synchronous save), or into a snapshot in host memory
// that a background thread replays into the file later (StateSnapshot, the
// asynchronous save). The mapping of training objects onto entries
// (training_checkpoint.cpp, optimizer_state.cpp) writes to either, so both
// saves produce the same file.
#pragma once

#include <ATen/core/Tensor.h>

#include <string_view>
#include <vector>

#include "accelerate/checkpoint/attribute_value.hpp"
#include "accelerate/checkpoint/checkpoint_writer.hpp"
#include "accelerate/checkpoint/tensor_piece.hpp"

namespace accelerate::checkpoint::detail {

/// The calls of CheckpointWriter the state mapping makes, with its meaning.
class StateWriter {
 public:
  virtual ~StateWriter() = default;
  virtual void write_replicated(std::string_view name, const at::Tensor& tensor) = 0;
  virtual void write_pieces(std::string_view name, c10::ScalarType dtype, at::IntArrayRef shape,
                            std::vector<TensorPiece> pieces) = 0;
  virtual void write_per_rank(std::string_view name, const at::Tensor& tensor) = 0;
  virtual void set_attribute(std::string_view group, std::string_view name, const AttributeValue& value) = 0;
  /// The ranks writing the file together.
  [[nodiscard]] virtual int size() const = 0;
};

class FileStateWriter final : public StateWriter {
 public:
  explicit FileStateWriter(CheckpointWriter& writer) : writer_(writer) {}
  void write_replicated(std::string_view name, const at::Tensor& tensor) override {
    writer_.write_replicated(name, tensor);
  }
  void write_pieces(std::string_view name, c10::ScalarType dtype, at::IntArrayRef shape,
                    std::vector<TensorPiece> pieces) override {
    writer_.write_pieces(name, dtype, shape, std::move(pieces));
  }
  void write_per_rank(std::string_view name, const at::Tensor& tensor) override {
    writer_.write_per_rank(name, tensor);
  }
  void set_attribute(std::string_view group, std::string_view name, const AttributeValue& value) override {
    writer_.set_attribute(group, name, value);
  }
  [[nodiscard]] int size() const override { return writer_.size(); }

 private:
  CheckpointWriter& writer_;
};

}  // namespace accelerate::checkpoint::detail
