// The replicas of a shard group (HYBRID_SHARD_ZERO2, HYBRID_SHARD): the ranks
// that hold the same shard on the other nodes. Shared by ShardedOptimizer
// (stage 2) and FullyShardedModel (stage 3).
#pragma once

#include <functional>
#include <string>

#include "accelerate/comm/process_group.hpp"

namespace accelerate::training_detail {

/// `replicas`, or nullptr where there are none to average with (unset, or a
/// group of one).
ProcessGroup* effective_replicas(ProcessGroup* replicas);

/// Checks, on every rank of `group` and `replicas`, that every copy of
/// `group` has as many ranks and that this rank holds the same place in its
/// copy as its replicas in theirs; otherwise calls `refuse` with the reason
/// on every rank (which must throw). Collective over both groups.
void require_matching_replicas(ProcessGroup& group, ProcessGroup& replicas,
                               const std::function<void(const std::string&)>& refuse);

}  // namespace accelerate::training_detail
