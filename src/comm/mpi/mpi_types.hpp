// Mapping of LibTorch dtypes and ReduceOps to MPI datatypes and operations.
//
// MPI has no 16-bit floating-point types. float16 and bfloat16 travel as
// opaque 2-byte elements; for reductions the table registers MPI user
// operations that widen each pair of elements to float, combine them and
// round back. There is no upcast copy of the whole tensor and no doubling
// of the bytes on the wire; the price is one rounding per combining step,
// as with NCCL's native half reductions.
//
// Bool reductions are logical: sum/max = OR, min/product = AND.
#pragma once

#include <mpi.h>

#include <c10/core/ScalarType.h>

#include "accelerate/comm/types.hpp"

namespace accelerate::detail {

class MpiTypeTable {
 public:
  MpiTypeTable();
  ~MpiTypeTable();
  MpiTypeTable(const MpiTypeTable&) = delete;
  MpiTypeTable& operator=(const MpiTypeTable&) = delete;

  /// The MPI datatype of one element; ConfigError for unsupported dtypes.
  [[nodiscard]] MPI_Datatype datatype(c10::ScalarType type) const;
  /// The MPI operation for `op` on `type`; Avg maps to the sum (the caller
  /// divides). ConfigError when the combination makes no sense (avg of
  /// integers).
  [[nodiscard]] MPI_Op operation(ReduceOp op, c10::ScalarType type) const;

 private:
  MPI_Datatype half_ = MPI_DATATYPE_NULL;
  MPI_Datatype bfloat16_ = MPI_DATATYPE_NULL;
  // [Sum, Min, Max, Product] for each 16-bit float type.
  MPI_Op half_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  MPI_Op bfloat16_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
};

/// Whether `op` is defined for `type` (used for early, uniform errors).
void check_reduction_supported(ReduceOp op, c10::ScalarType type, const char* operation);

}  // namespace accelerate::detail
