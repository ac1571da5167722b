#include "training_state/state_snapshot.hpp"

#include <ATen/ATen.h>

#include <utility>

namespace accelerate::checkpoint::detail {

void StateSnapshot::begin(int file_ranks) {
  file_ranks_ = file_ranks;
  records_.clear();
  next_buffer_ = 0;
  allocated_ = 0;
  staged_bytes_ = 0;
}

at::Tensor StateSnapshot::stage(const at::Tensor& tensor) {
  if (!tensor.defined()) return tensor;
  const at::Tensor source = tensor.detach();
  const bool pinned = source.is_cuda();
  auto fits = [&](const at::Tensor& buffer) {
    return buffer.scalar_type() == source.scalar_type() && buffer.numel() == source.numel() &&
           (!pinned || buffer.is_pinned());
  };
  if (next_buffer_ == buffers_.size()) buffers_.emplace_back();
  at::Tensor& buffer = buffers_[next_buffer_++];
  if (!buffer.defined() || !fits(buffer)) {
    buffer = at::empty({source.numel()},
                       at::TensorOptions().dtype(source.scalar_type()).device(at::kCPU).pinned_memory(pinned));
    ++allocated_;
  }
  at::Tensor copy = buffer.view(source.sizes());
  copy.copy_(source);  // synchronous: the next steps may change the source at once
  staged_bytes_ += static_cast<std::uint64_t>(copy.nbytes());
  return copy;
}

void StateSnapshot::write_replicated(std::string_view name, const at::Tensor& tensor) {
  Record& record = records_.emplace_back(Kind::Replicated, name);
  record.tensor = stage(tensor);
}

void StateSnapshot::write_pieces(std::string_view name, c10::ScalarType dtype, at::IntArrayRef shape,
                                 std::vector<TensorPiece> pieces) {
  for (TensorPiece& piece : pieces) piece.data = stage(piece.data);
  Record& record = records_.emplace_back(Kind::Pieces, name);
  record.dtype = dtype;
  record.shape = shape.vec();
  record.pieces = std::move(pieces);
}

void StateSnapshot::write_per_rank(std::string_view name, const at::Tensor& tensor) {
  Record& record = records_.emplace_back(Kind::PerRank, name);
  record.tensor = stage(tensor);
}

void StateSnapshot::set_attribute(std::string_view group, std::string_view name, const AttributeValue& value) {
  Record& record = records_.emplace_back(Kind::Attribute, group);
  record.attribute = name;
  record.value = value;
}

void StateSnapshot::replay(StateWriter& into) const {
  for (const Record& record : records_) {
    switch (record.kind) {
      case Kind::Replicated: into.write_replicated(record.name, record.tensor); break;
      case Kind::Pieces: into.write_pieces(record.name, record.dtype, record.shape, record.pieces); break;
      case Kind::PerRank: into.write_per_rank(record.name, record.tensor); break;
      case Kind::Attribute: into.set_attribute(record.name, record.attribute, record.value); break;
    }
  }
}

std::uint64_t StateSnapshot::buffer_bytes() const noexcept {
  std::uint64_t bytes = 0;
  for (const at::Tensor& buffer : buffers_) {
    if (buffer.defined()) bytes += static_cast<std::uint64_t>(buffer.nbytes());
  }
  return bytes;
}

}  // namespace accelerate::checkpoint::detail
