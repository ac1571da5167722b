#include "comm/mpi/mpi_types.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <string>

#include "accelerate/error.hpp"
#include "detail/mpi_check.hpp"

namespace accelerate::detail {
namespace {

struct Sum {
  static float apply(float a, float b) { return a + b; }
};
struct Min {
  static float apply(float a, float b) { return std::min(a, b); }
};
struct Max {
  static float apply(float a, float b) { return std::max(a, b); }
};
struct Product {
  static float apply(float a, float b) { return a * b; }
};

// MPI user operation: inout[i] = in[i] (op) inout[i], computed in float.
template <typename Element, typename Combine>
void combine_16bit(void* in, void* inout, int* length, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const Element*>(in);
  auto* b = static_cast<Element*>(inout);
  for (int i = 0; i < *length; ++i) {
    b[i] = Element(Combine::apply(static_cast<float>(a[i]), static_cast<float>(b[i])));
  }
}

template <typename Element>
void create_ops(MPI_Op (&ops)[4]) {
  ACCELERATE_MPI_CHECK(MPI_Op_create(&combine_16bit<Element, Sum>, 1, &ops[0]));
  ACCELERATE_MPI_CHECK(MPI_Op_create(&combine_16bit<Element, Min>, 1, &ops[1]));
  ACCELERATE_MPI_CHECK(MPI_Op_create(&combine_16bit<Element, Max>, 1, &ops[2]));
  ACCELERATE_MPI_CHECK(MPI_Op_create(&combine_16bit<Element, Product>, 1, &ops[3]));
}

int op_slot(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return 0;
    case ReduceOp::Min: return 1;
    case ReduceOp::Max: return 2;
    case ReduceOp::Product: return 3;
  }
  return 0;
}

bool is_floating(c10::ScalarType type) {
  return type == c10::kFloat || type == c10::kDouble || type == c10::kHalf || type == c10::kBFloat16;
}

}  // namespace

MpiTypeTable::MpiTypeTable() {
  ACCELERATE_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &half_));
  ACCELERATE_MPI_CHECK(MPI_Type_commit(&half_));
  ACCELERATE_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &bfloat16_));
  ACCELERATE_MPI_CHECK(MPI_Type_commit(&bfloat16_));
  create_ops<c10::Half>(half_ops_);
  create_ops<c10::BFloat16>(bfloat16_ops_);
}

MpiTypeTable::~MpiTypeTable() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) return;  // MPI already released everything
  for (MPI_Op* ops : {half_ops_, bfloat16_ops_}) {
    for (int i = 0; i < 4; ++i) {
      if (ops[i] != MPI_OP_NULL) MPI_Op_free(&ops[i]);
    }
  }
  if (half_ != MPI_DATATYPE_NULL) MPI_Type_free(&half_);
  if (bfloat16_ != MPI_DATATYPE_NULL) MPI_Type_free(&bfloat16_);
}

MPI_Datatype MpiTypeTable::datatype(c10::ScalarType type) const {
  switch (type) {
    case c10::kFloat: return MPI_FLOAT;
    case c10::kDouble: return MPI_DOUBLE;
    case c10::kHalf: return half_;
    case c10::kBFloat16: return bfloat16_;
    case c10::kInt: return MPI_INT32_T;
    case c10::kLong: return MPI_INT64_T;
    case c10::kShort: return MPI_INT16_T;
    case c10::kChar: return MPI_INT8_T;
    case c10::kByte: return MPI_UINT8_T;
    case c10::kBool: return MPI_C_BOOL;
    default: break;
  }
  throw ConfigError("MPI backend: dtype " + std::string(c10::toString(type)) +
                    " is not supported by the collectives; convert the tensor to one of float32, float64, "
                    "float16, bfloat16, int8, int16, int32, int64, uint8 or bool first.");
}

MPI_Op MpiTypeTable::operation(ReduceOp op, c10::ScalarType type) const {
  check_reduction_supported(op, type, "reduction");
  if (type == c10::kHalf) return half_ops_[op_slot(op)];
  if (type == c10::kBFloat16) return bfloat16_ops_[op_slot(op)];
  if (type == c10::kBool) {
    return (op == ReduceOp::Sum || op == ReduceOp::Max) ? MPI_LOR : MPI_LAND;
  }
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Product: return MPI_PROD;
  }
  return MPI_SUM;
}

void check_reduction_supported(ReduceOp op, c10::ScalarType type, const char* operation) {
  if (op == ReduceOp::Avg && !is_floating(type)) {
    throw ConfigError(std::string(operation) + ": ReduceOp::Avg needs a floating-point tensor, got " +
                      std::string(c10::toString(type)) +
                      "; reduce with ReduceOp::Sum and divide, or convert the tensor to float first.");
  }
}

}  // namespace accelerate::detail
