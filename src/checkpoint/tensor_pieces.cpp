#include "checkpoint/tensor_pieces.hpp"

#include <algorithm>

#include "accelerate/error.hpp"
#include "checkpoint/collective.hpp"
#include "checkpoint/hdf5_types.hpp"

namespace accelerate::checkpoint::detail {

void require_valid_pieces(const accelerate::detail::DeadlineComm& comm, std::vector<TensorPiece>& pieces,
                          c10::ScalarType dtype, std::int64_t total, std::string problem, std::string_view call,
                          const std::string& where) {
  std::sort(pieces.begin(), pieces.end(),
            [](const TensorPiece& a, const TensorPiece& b) { return a.offset < b.offset; });
  for (const TensorPiece& piece : pieces) {
    if (!problem.empty()) break;
    const std::string which = "the piece at offset " + std::to_string(piece.offset);
    if (!piece.data.defined() || piece.data.dim() != 1) {
      problem = which + " is not a 1-D tensor";
    } else if (piece.data.scalar_type() != dtype) {
      problem = which + " is " + std::string(dtype_name(piece.data.scalar_type())) + ", the tensor " +
                std::string(dtype_name(dtype));
    } else if (piece.offset < 0 || piece.offset + piece.data.numel() > total) {
      problem = which + " with " + std::to_string(piece.data.numel()) + " elements lies outside the tensor's " +
                std::to_string(total);
    }
  }
  if (!all_ranks_agree(comm, problem.empty(), std::string(call) + " (are every rank's pieces valid?)")) {
    throw ConfigError("checkpoint: " + std::string(call) + " of '" + where +
                      "': " + (problem.empty() ? "another rank's pieces are invalid (see its error)" : problem) + ".");
  }
}

std::vector<std::pair<std::int64_t, std::int64_t>> flat_ranges(const std::vector<TensorPiece>& pieces) {
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  for (const TensorPiece& piece : pieces) {
    if (piece.data.numel() > 0) ranges.emplace_back(piece.offset, piece.data.numel());
  }
  return ranges;
}

int copy_in_file(int shard_ranks, int replicas, int replica, int file_ranks, const std::string& what,
                 const std::string& where) {
  if (file_ranks == shard_ranks) return 0;
  if (file_ranks == shard_ranks * replicas) return replica;
  throw ConfigError(where + ": " + what + " is sharded over " + std::to_string(shard_ranks) + " ranks" +
                    (replicas > 1 ? " (in " + std::to_string(replicas) + " copies)" : "") + ", but " +
                    std::to_string(file_ranks) +
                    " ranks share this checkpoint file, so their shards are not the whole of it. With "
                    "save_on_each_node, shard within each node (HYBRID_SHARD, HYBRID_SHARD_ZERO2), or save without "
                    "it.");
}

}  // namespace accelerate::checkpoint::detail
