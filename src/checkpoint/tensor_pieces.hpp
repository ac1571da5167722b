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

/// Which copy of sharded tensors this rank's pieces count in, in a file that
/// `file_ranks` ranks write or read together, for tensors cut over
/// `shard_ranks` ranks and held in `replicas` copies (this rank in copy
/// `replica`). The shards' own ranks hold the tensors once. A file shared by
/// every copy (HYBRID_SHARD saved without save_on_each_node) holds each copy's
/// pieces; a file of one copy's ranks (save_on_each_node with the shards
/// inside a node) holds them once. ConfigError, naming `what`, otherwise.
int copy_in_file(int shard_ranks, int replicas, int replica, int file_ranks, const std::string& what,
                 const std::string& where);

/// (offset, count) of every non-empty piece, in the pieces' order.
std::vector<std::pair<std::int64_t, std::int64_t>> flat_ranges(const std::vector<TensorPiece>& pieces);

}  // namespace accelerate::checkpoint::detail
