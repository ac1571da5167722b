// Debug mode (ACCELERATE_DEBUG_MODE=1): before a collective, the ranks
// exchange what they are about to do (operation, root, dtype, device, shape)
// and every rank raises CollectiveMismatch, listing each rank's view, when
// they disagree. One small all-gather per collective; off by default.
#pragma once

#include <mpi.h>

#include <ATen/core/Tensor.h>

#include <chrono>
#include <string_view>

namespace accelerate::detail {

enum class ShapeRule : int {  // declared ahead in process_group.hpp
  Exact,                      ///< every dimension must match (all_reduce, broadcast, all_gather, …)
  Trailing,                   ///< dimensions after the first must match (all_gather_varying)
  Ignore,                     ///< only operation and root are compared (barrier, objects)
};

void verify_collective(MPI_Comm control, std::string_view group, std::string_view operation, const at::Tensor* tensor,
                       int root, ShapeRule rule, std::chrono::milliseconds timeout);

}  // namespace accelerate::detail
