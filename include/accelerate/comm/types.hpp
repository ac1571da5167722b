// Reduction operators and per-operation options of the collectives.
//
// Options are plain structs so that a field can be added without changing a
// signature; write them with designated initialisers:
//   group.all_reduce(t, {.op = accelerate::ReduceOp::Max});
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace accelerate {

enum class ReduceOp {
  Sum,
  Avg,  ///< sum divided by the group size; floating-point tensors only
  Min,
  Max,
  Product,
};

constexpr std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Product: return "product";
  }
  return "?";
}

/// A deadline for one operation; unset means the group's timeout
/// (InitProcessGroupKwargs::timeout, ACCELERATE_TIMEOUT).
using Timeout = std::optional<std::chrono::milliseconds>;

struct AllReduceOptions {
  ReduceOp op = ReduceOp::Sum;
  Timeout timeout;
};

struct BroadcastOptions {
  int root = 0;
  Timeout timeout;
};

struct AllGatherOptions {
  Timeout timeout;
};

struct GatherOptions {
  int root = 0;
  Timeout timeout;
};

struct ScatterOptions {
  int root = 0;
  Timeout timeout;
};

struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::Sum;
  Timeout timeout;
};

struct AllToAllOptions {
  Timeout timeout;
};

struct BarrierOptions {
  Timeout timeout;
};

}  // namespace accelerate
