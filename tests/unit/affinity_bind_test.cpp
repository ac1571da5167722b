// NUMA affinity applied for real on this machine: the process binding read
// back with hwloc_get_cpubind, the memory policy, LibTorch's thread count,
// a thread created afterwards, caching, and the Respect policy against a
// launcher-style binding. Runs at any rank count (ranks of one node check
// that their shares are disjoint).
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <hwloc.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

#include "accelerate/runtime/host.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/numa_affinity.hpp"
#include "accelerate/runtime/state.hpp"
#include "runtime/numa_affinity_cache.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace accelerate::ACCELERATE_TEST_FILE_ID {
namespace {

class AffinityBind : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("OMP_NUM_THREADS");  // the thread count must follow the cores received
    unsetenv("ACCELERATE_CPU_AFFINITY");
    ASSERT_EQ(hwloc_topology_init(&topology_), 0);
    ASSERT_EQ(hwloc_topology_load(topology_), 0);
    allowed_ = to_list(hwloc_topology_get_allowed_cpuset(topology_));
    detail::reset_numa_affinity_cache();
  }
  void TearDown() override { hwloc_topology_destroy(topology_); }

  static std::vector<int> to_list(hwloc_const_bitmap_t set) {
    std::vector<int> out;
    for (int i = hwloc_bitmap_first(set); i != -1; i = hwloc_bitmap_next(set, i)) out.push_back(i);
    return out;
  }
  std::vector<int> binding(int flags) const {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    EXPECT_EQ(hwloc_get_cpubind(topology_, set, flags), 0);
    std::vector<int> out = to_list(set);
    hwloc_bitmap_free(set);
    return out;
  }
  void bind_process(const std::vector<int>& cpus) const {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    for (int c : cpus) hwloc_bitmap_set(set, static_cast<unsigned>(c));
    ASSERT_EQ(hwloc_set_cpubind(topology_, set, HWLOC_CPUBIND_PROCESS), 0);
    hwloc_bitmap_free(set);
  }

  hwloc_topology_t topology_ = nullptr;
  std::vector<int> allowed_;
};

TEST_F(AffinityBind, OverrideBindsProcessMemoryThreadsAndLaterThreads) {
  const State state;
  NumaAffinityOptions options;
  options.policy = AffinityPolicy::Override;
  const NumaBinding b = set_numa_affinity(state, options);
  EXPECT_EQ(b.decision, AffinityDecision::Bound);
  ASSERT_FALSE(b.cpus.empty());
  EXPECT_TRUE(std::includes(allowed_.begin(), allowed_.end(), b.cpus.begin(), b.cpus.end()))
      << format_cpu_list(b.cpus) << " not within " << format_cpu_list(allowed_);
  EXPECT_EQ(binding(HWLOC_CPUBIND_PROCESS), b.cpus);
  EXPECT_EQ(at::get_num_threads(), b.cores);
  EXPECT_EQ(b.intra_op_threads, b.cores);

  // Memory policy of this thread: bound to the chosen nodes.
  hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
  hwloc_membind_policy_t policy = HWLOC_MEMBIND_DEFAULT;
  ASSERT_EQ(hwloc_get_membind(topology_, nodes, &policy, HWLOC_MEMBIND_BYNODESET), 0);
  EXPECT_EQ(policy, HWLOC_MEMBIND_BIND);
  EXPECT_EQ(to_list(nodes), b.numa_nodes);
  hwloc_bitmap_free(nodes);

  // A thread created afterwards runs inside the binding.
  std::vector<int> seen;
  std::thread([&] { seen = binding(HWLOC_CPUBIND_THREAD); }).join();
  EXPECT_EQ(seen, b.cpus);

  // Ranks of one node: disjoint shares while there are cores for everyone.
  const int local_size = state.num_local_processes();
  std::vector<unsigned long long> masks(static_cast<std::size_t>(local_size), 0);
  unsigned long long mine = 0;
  for (int c : b.cpus) {
    if (c < 64) mine |= 1ULL << c;
  }
  MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, masks.data(), 1, MPI_UNSIGNED_LONG_LONG, state.node_comm());
  const bool enough_cores = static_cast<int>(hwloc_get_nbobjs_by_type(topology_, HWLOC_OBJ_CORE)) >= local_size;
  for (int i = 0; i < local_size && enough_cores; ++i) {
    for (int j = i + 1; j < local_size; ++j) {
      EXPECT_EQ(masks[static_cast<std::size_t>(i)] & masks[static_cast<std::size_t>(j)], 0ULL)
          << "local ranks " << i << " and " << j << " overlap";
    }
  }
  if (!enough_cores) {
    ASSERT_FALSE(b.notes.empty());
    EXPECT_NE(b.notes[0].find("oversubscribed"), std::string::npos);
  }
}

TEST_F(AffinityBind, RespectKeepsALauncherBindingUntilOverridden) {
  if (allowed_.size() < 2) GTEST_SKIP() << "needs 2 allowed PUs to make a strict-subset binding";
  const State state;
  // What `mpirun --bind-to core` would have done.
  const std::vector<int> launcher = {allowed_[static_cast<std::size_t>(state.local_process_index()) % allowed_.size()]};
  bind_process(launcher);
  const NumaBinding kept = set_numa_affinity(state.local_process_index());
  EXPECT_EQ(kept.decision, AffinityDecision::KeptLauncherBinding);
  EXPECT_EQ(kept.cpus, launcher);
  EXPECT_EQ(binding(HWLOC_CPUBIND_PROCESS), launcher);
  EXPECT_EQ(kept.cores, 1);
  EXPECT_EQ(at::get_num_threads(), 1);

  const NumaBinding replaced = override_numa_affinity(state.local_process_index());
  EXPECT_EQ(replaced.decision, AffinityDecision::Bound);
  EXPECT_EQ(binding(HWLOC_CPUBIND_PROCESS), replaced.cpus);
  if (state.num_local_processes() == 1) EXPECT_EQ(replaced.cpus, allowed_);
}

TEST_F(AffinityBind, SecondCallReturnsTheCachedBindingWithoutRebinding) {
  const State state;
  const NumaBinding first = override_numa_affinity(state.local_process_index());
  bind_process(allowed_);  // someone else changes the binding afterwards
  const NumaBinding again = set_numa_affinity(state.local_process_index(), false);
  EXPECT_EQ(again.cpus, first.cpus);
  EXPECT_EQ(again.decision, first.decision);
  EXPECT_EQ(binding(HWLOC_CPUBIND_PROCESS), allowed_);  // untouched: cached, not recomputed
  ASSERT_TRUE(cached_numa_affinity().has_value());
  EXPECT_EQ(cached_numa_affinity()->cpus, first.cpus);
}

TEST_F(AffinityBind, DescribeCurrentBindingReadsTheSystem) {
  const State state;
  EXPECT_NE(describe_current_binding().find("set_numa_affinity not called"), std::string::npos);
  const NumaBinding b = override_numa_affinity(state.local_process_index());
  const std::string text = describe_current_binding();
  EXPECT_NE(text.find("cpus " + format_cpu_list(b.cpus) + " ("), std::string::npos) << text;
  EXPECT_NE(text.find("memory bind to NUMA"), std::string::npos) << text;
  EXPECT_NE(text.find("set_numa_affinity: bound"), std::string::npos) << text;
}

TEST_F(AffinityBind, ConfiguredOnlyWhenAskedFor) {
  const State state;
  EXPECT_FALSE(apply_configured_numa_affinity(state).has_value());
  EXPECT_FALSE(cached_numa_affinity().has_value());
  setenv("ACCELERATE_CPU_AFFINITY", "1", 1);
  const auto b = apply_configured_numa_affinity(state);
  unsetenv("ACCELERATE_CPU_AFFINITY");
  ASSERT_TRUE(b.has_value());
  EXPECT_NE(b->decision, AffinityDecision::Disabled);
  EXPECT_TRUE(apply_configured_numa_affinity(state, /*enabled_by_config=*/true).has_value());
}

}  // namespace
}  // namespace accelerate::ACCELERATE_TEST_FILE_ID
