#include "training/replica_groups.hpp"

#include <ATen/ATen.h>

#include <cstdint>

namespace accelerate::training_detail {

ProcessGroup* effective_replicas(ProcessGroup* replicas) {
  return replicas != nullptr && replicas->size() > 1 ? replicas : nullptr;
}

void require_matching_replicas(ProcessGroup& group, ProcessGroup& replicas,
                               const std::function<void(const std::string&)>& refuse) {
  // The replicas step the same slices only if every copy of the group is
  // alike and this rank holds the same place in each. Every rank checks,
  // even one without replicas (a node of its own size), so all refuse.
  const int size = group.size();
  AllReduceOptions maximum;
  maximum.op = ReduceOp::Max;
  auto place =
      at::tensor({std::int64_t{size}, -std::int64_t{size}, std::int64_t{group.rank()}, -std::int64_t{group.rank()}},
                 at::kLong);
  replicas.all_reduce(place, maximum);
  const bool alike = place[0].item<std::int64_t>() == -place[1].item<std::int64_t>() &&
                     place[2].item<std::int64_t>() == -place[3].item<std::int64_t>();
  // The verdict goes round the group too, so that every rank refuses.
  auto refused = at::tensor({std::int64_t{alike ? 0 : 1}}, at::kLong);
  group.all_reduce(refused, maximum);
  if (refused.item<std::int64_t>() != 0) {
    refuse("the replicas (" + std::to_string(replicas.size()) +
           " ranks with this rank) do not each hold the same place in a group of the same size: this rank is " +
           std::to_string(group.rank()) + " of " + std::to_string(size) +
           (alike ? "; another rank of the group disagrees with its replicas" : "") +
           ". Pass the node as the group and the cross-node group as the replicas, on nodes with the same number "
           "of ranks.");
  }
}

}  // namespace accelerate::training_detail
