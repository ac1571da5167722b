// Test hook for the per-process cache of set_numa_affinity's result.
#pragma once

namespace accelerate::detail {

/// Forgets the cached binding (the process stays bound as it is), so a test
/// can exercise another policy in the same process.
void reset_numa_affinity_cache();

}  // namespace accelerate::detail
