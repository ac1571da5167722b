// How the parameters of a sharded optimizer map to the model's parameters on
// this rank. A ShardedOptimizer steps one slice per bucket of each param
// group, several tensors that together are this rank's shard; the
// checkpoint code uses this map to store the optimizer state as whole
// per-parameter tensors (each rank writing its pieces), so that the file does
// not depend on the number of ranks or on the sharding, and to cut such a
// file into another rank count's shards on load.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "accelerate/checkpoint/tensor_piece.hpp"

namespace accelerate::checkpoint {

struct ShardLayout {
  /// A run of one model parameter inside this rank's shard.
  struct Piece {
    std::size_t parameter = 0;      // index among the param group's model parameters
    std::int64_t offset = 0;        // first element, in the flattened parameter
    std::int64_t count = 0;         // elements
    std::size_t tensor = 0;         // which of the optimizer's parameters of the group holds the run
    std::int64_t shard_offset = 0;  // where the run starts in that (1-d) tensor
  };
  /// One param group: the optimizer's parameters of the group (this rank's
  /// slices) stand for these model parameters.
  struct Group {
    std::vector<at::Tensor> parameters;  // the model's parameters of the group, in order
    std::vector<Piece> pieces;           // this rank's runs, in shard order (padding excluded)
  };
  int world_size = 1;         // ranks the state is sharded over
  int replicas = 1;           // copies of every shard (HYBRID_SHARD_ZERO2: one per node)
  int replica = 0;            // which copy this rank holds
  std::vector<Group> groups;  // one per param group of the optimizer
};

/// A model's parameters that no rank holds whole (FULL_SHARD): each by its
/// name in the model's state, with this rank's pieces of it (views of the
/// shards). A checkpoint writes them with write_pieces and reads them straight
/// into the pieces, so no rank gathers the model; the file holds the same
/// whole tensors as a run without sharding writes.
struct ShardedWeights {
  struct Weight {
    std::string name;
    c10::ScalarType dtype = c10::ScalarType::Float;
    std::vector<std::int64_t> shape;
    std::vector<TensorPiece> pieces;  // this rank's, padding excluded
  };
  std::vector<Weight> weights;
  int world_size = 1;  // ranks the weights are cut over
  int replicas = 1;    // copies of every piece (HYBRID_SHARD: one per node)
  int replica = 0;     // which copy this rank holds
};

}  // namespace accelerate::checkpoint
