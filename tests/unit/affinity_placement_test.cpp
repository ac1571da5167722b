// The placement logic on hand-built topologies: small machines, uneven
// domains, oversubscription, bad input. Needs no hwloc.
#include <gtest/gtest.h>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/numa_affinity.hpp"
#include "common/test_helpers.hpp"
#include "runtime/numa_affinity_placement.hpp"
#include "topologies/plan_checks.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace accelerate::ACCELERATE_TEST_FILE_ID {
namespace {

using detail::NodeRequest;
using detail::TopologyDescription;
using testing::range;

// `cores[d]` cores in domain d, `smt` PUs per core, siblings numbered apart
// by the total core count (as on most x86 servers).
TopologyDescription machine(const std::vector<int>& cores, int smt) {
  TopologyDescription t;
  int total = 0;
  for (int c : cores) total += c;
  int next = 0;
  for (std::size_t d = 0; d < cores.size(); ++d) {
    t.numa_nodes.push_back(static_cast<int>(d));
    for (int c = 0; c < cores[d]; ++c, ++next) {
      TopologyDescription::Core core{{}, static_cast<int>(d)};
      for (int s = 0; s < smt; ++s) core.pus.push_back(next + s * total);
      t.cores.push_back(core);
    }
  }
  return t;
}

TEST(AffinityPlacement, SmallMachineOneCorePerRank) {
  const TopologyDescription t = machine({2}, 1);
  auto plan = detail::plan_node(t, {range(0, 1), 1, {}});
  EXPECT_EQ(plan[0].cpus, range(0, 1));
  EXPECT_EQ(plan[0].cores, 2);
  plan = detail::plan_node(t, {range(0, 1), 2, {}});
  testing::expect_valid_plan(t, {range(0, 1), 2, {}}, plan);
  EXPECT_EQ(plan[0].cpus, std::vector<int>{0});
  EXPECT_EQ(plan[1].cpus, std::vector<int>{1});
}

TEST(AffinityPlacement, MoreRanksThanCoresShareRoundRobinAndSaySo) {
  const TopologyDescription t = machine({2}, 1);
  const auto plan = detail::plan_node(t, {range(0, 1), 4, {}});
  ASSERT_EQ(plan.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(plan[static_cast<std::size_t>(r)].cpus, std::vector<int>{r % 2});
    ASSERT_FALSE(plan[static_cast<std::size_t>(r)].notes.empty());
    EXPECT_NE(plan[static_cast<std::size_t>(r)].notes[0].find("oversubscribed"), std::string::npos);
  }
}

TEST(AffinityPlacement, RanksFollowCoresOnUnevenDomains) {
  // Domain 0 has 2 cores, domain 1 has 6: of 4 ranks, one goes to domain 0.
  const TopologyDescription t = machine({2, 6}, 2);
  const NodeRequest request{range(0, 15), 4, {}};
  const auto plan = detail::plan_node(t, request);
  testing::expect_valid_plan(t, request, plan);
  EXPECT_EQ(plan[0].numa_nodes, std::vector<int>{0});
  EXPECT_EQ(plan[0].cpus, (std::vector<int>{0, 1, 8, 9}));
  for (std::size_t r = 1; r < 4; ++r) {
    EXPECT_EQ(plan[r].numa_nodes, std::vector<int>{1});
    EXPECT_EQ(plan[r].cores, 2);
  }
}

TEST(AffinityPlacement, EveryCoreIsUsedWhenRanksCoverTheDomains) {
  const TopologyDescription t = machine({3, 3, 3}, 2);
  for (int ranks = 3; ranks <= 9; ++ranks) {
    const NodeRequest request{range(0, 17), ranks, {}};
    const auto plan = detail::plan_node(t, request);
    testing::expect_valid_plan(t, request, plan);
    int cores = 0;
    for (const auto& p : plan) cores += p.cores;
    EXPECT_EQ(cores, 9) << ranks << " ranks";
  }
}

TEST(AffinityPlacement, PciBusIdsCompareByValue) {
  EXPECT_TRUE(detail::same_pci_bus_id("0000:3B:00.0", "00000000:3b:00.0"));
  EXPECT_TRUE(detail::same_pci_bus_id("3b:00.0", "0000:3b:00.0"));
  EXPECT_FALSE(detail::same_pci_bus_id("0000:3b:00.0", "0000:3b:00.1"));
  EXPECT_FALSE(detail::same_pci_bus_id("0001:3b:00.0", "0000:3b:00.0"));
  EXPECT_FALSE(detail::same_pci_bus_id("GPU-0", "GPU-0"));
  EXPECT_FALSE(detail::same_pci_bus_id("", ""));
}

TEST(AffinityPlacement, BadInputNamesTheProblem) {
  const TopologyDescription t = machine({4}, 1);
  using testing::error_of;
  EXPECT_NE(error_of([&] { detail::plan_node(t, {range(0, 3), 0, {}}); }).find("at least 1"), std::string::npos);
  EXPECT_NE(error_of([&] { detail::plan_node(t, {range(0, 3), 2, {"0000:01:00.0"}}); })
                .find("1 GPU PCI bus ids were given for 2 local processes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { detail::plan_node(t, {range(100, 103), 1, {}}); }).find("allowed cpus 100-103"),
            std::string::npos);
  EXPECT_NE(error_of([&] { detail::place_rank(t, {{range(0, 3), 2, {}}, 2, {}, AffinityPolicy::Respect}); })
                .find("local process index 2 is outside [0, 2)"),
            std::string::npos);
}

TEST(AffinityPlacement, PolicyNamesRoundTrip) {
  for (AffinityPolicy p : {AffinityPolicy::Respect, AffinityPolicy::Override, AffinityPolicy::Off}) {
    EXPECT_EQ(parse_affinity_policy(to_string(p)), p);
  }
  EXPECT_NE(testing::error_of([] { parse_affinity_policy("bind"); }).find("'bind' is not one of"), std::string::npos);
}

TEST(AffinityPlacement, DescribeNamesCpusNodesAndDecision) {
  NumaBinding b;
  b.decision = AffinityDecision::Bound;
  b.local_process_index = 1;
  b.num_local_processes = 4;
  b.cpus = {8, 9, 10, 11, 40, 41, 42, 43};
  b.numa_nodes = {1};
  b.cores = 4;
  b.intra_op_threads = 4;
  b.gpu_pci_bus_id = "0000:31:00.0";
  EXPECT_EQ(b.describe(), "local 1/4: cpus 8-11,40-43 (4 cores) numa 1 threads 4 [bound, gpu 0000:31:00.0]");
}

#if !ACCELERATE_HAVE_HWLOC
TEST(AffinityPlacement, WithoutHwlocBindingIsFeatureNotBuilt) {
  const std::string message = testing::error_of<FeatureNotBuilt>([] { set_numa_affinity(0); });
  EXPECT_NE(message.find("ACCELERATE_WITH_HWLOC"), std::string::npos) << message;
  EXPECT_NE(message.find("accelerate-hpc+hwloc"), std::string::npos) << message;
}
#endif

}  // namespace
}  // namespace accelerate::ACCELERATE_TEST_FILE_ID
