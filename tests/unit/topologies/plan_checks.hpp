// Checks shared by the affinity tests: the invariants every node plan must
// satisfy, whatever the topology, rank count or allowed set.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "runtime/numa_affinity_placement.hpp"

namespace accelerate::testing {

inline std::vector<int> range(int first, int last) {  // [first, last]
  std::vector<int> out;
  for (int i = first; i <= last; ++i) out.push_back(i);
  return out;
}

inline std::vector<int> concat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  return a;
}

/// Asserts the rules of docs/affinity.md on a plan for `request`.
inline void expect_valid_plan(const detail::TopologyDescription& topology, const detail::NodeRequest& request,
                              const std::vector<detail::Placement>& plan) {
  ASSERT_EQ(plan.size(), static_cast<std::size_t>(request.num_local_processes));
  const std::set<int> allowed(request.allowed_cpus.begin(), request.allowed_cpus.end());
  std::map<int, int> owner_of_pu;
  bool oversubscribed = false;
  for (std::size_t r = 0; r < plan.size(); ++r) {
    const detail::Placement& p = plan[r];
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_FALSE(p.cpus.empty());
    EXPECT_TRUE(std::is_sorted(p.cpus.begin(), p.cpus.end()));
    for (const std::string& note : p.notes) oversubscribed |= note.find("oversubscribed") != std::string::npos;
    for (int pu : p.cpus) {
      EXPECT_EQ(allowed.count(pu), 1u) << "PU " << pu << " is outside the allowed set";
      if (!oversubscribed) {
        EXPECT_EQ(owner_of_pu.count(pu), 0u) << "PU " << pu << " given to two ranks";
      }
      owner_of_pu[pu] = static_cast<int>(r);
    }
    // Cores: whole (every allowed sibling), counted, and inside the rank's NUMA nodes.
    int cores = 0;
    for (const auto& core : topology.cores) {
      int mine = 0;
      int usable = 0;
      for (int pu : core.pus) {
        if (allowed.count(pu) == 0) continue;
        ++usable;
        mine += std::binary_search(p.cpus.begin(), p.cpus.end(), pu) ? 1 : 0;
      }
      if (mine == 0) continue;
      ++cores;
      EXPECT_EQ(mine, usable) << "SMT siblings of a core were split";
      const int node = topology.numa_nodes[static_cast<std::size_t>(core.domain)];
      EXPECT_TRUE(std::binary_search(p.numa_nodes.begin(), p.numa_nodes.end(), node))
          << "a core of NUMA node " << node << " is outside the rank's NUMA nodes";
    }
    EXPECT_EQ(cores, p.cores);
  }
  // Ranks sharing the same NUMA node(s) get core counts differing by at most one.
  std::map<std::vector<int>, std::vector<int>> counts;
  for (const auto& p : plan) counts[p.numa_nodes].push_back(p.cores);
  for (const auto& [nodes, c] : counts) {
    EXPECT_LE(*std::max_element(c.begin(), c.end()) - *std::min_element(c.begin(), c.end()), 1);
  }
}

}  // namespace accelerate::testing
