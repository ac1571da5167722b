// A piece of a tensor that no single rank holds whole (the optimizer state of
// a sharded optimizer): elements [offset, offset + data.numel()) of the whole
// tensor, flattened in row-major order. CheckpointWriter::write_pieces writes
// the ranks' pieces into one dataset of the whole tensor's shape, and
// CheckpointReader::read_pieces reads any other cut of it back.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace accelerate::checkpoint {

struct TensorPiece {
  std::int64_t offset = 0;  // first element, in the flattened whole tensor
  at::Tensor data;          // 1-D; the piece's elements (written from, or read into)
};

}  // namespace accelerate::checkpoint
