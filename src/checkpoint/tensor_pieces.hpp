// What write_pieces() and read_pieces() both do with a rank's pieces before
// touching the file: sort them, check them on every rank, and list their
// flat element ranges for the HDF5 selection.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "accelerate/checkpoint/tensor_piece.hpp"
#include "detail/deadline_comm.hpp"

namespace accelerate::checkpoint::detail {

/// Sorts `pieces` by offset, then throws ConfigError on every rank when any
/// rank's pieces are not 1-D tensors of `dtype` inside [0, total), or when
/// `problem` (a reason found by the caller, e.g. the entry's kind) is not
/// empty on some rank. `call` and `where` name the operation and the dataset.
void require_valid_pieces(const accelerate::detail::DeadlineComm& comm, std::vector<TensorPiece>& pieces,
                          c10::ScalarType dtype, std::int64_t total, std::string problem, std::string_view call,
                          const std::string& where);

/// (offset, count) of every non-empty piece, in the pieces' order.
std::vector<std::pair<std::int64_t, std::int64_t>> flat_ranges(const std::vector<TensorPiece>& pieces);

}  // namespace accelerate::checkpoint::detail
