// Placement on synthetic two-socket topologies loaded from hwloc XML
// (tests/unit/topologies): 2 packages x 2 NUMA domains x 8 cores x 2 PUs,
// SMT siblings numbered c and c+32, four GPUs. Ranks 1-8 per node, with and
// without GPUs, with full and restricted allowed sets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "accelerate/error.hpp"
#include "common/test_helpers.hpp"
#include "runtime/numa_affinity_placement.hpp"
#include "runtime/numa_affinity_topology.hpp"
#include "topologies/plan_checks.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace accelerate::ACCELERATE_TEST_FILE_ID {
namespace {

using detail::HwlocTopology;
using detail::NodeRequest;
using detail::TopologyDescription;
using testing::concat;
using testing::range;

const std::string kNumaGpus = std::string(ACCELERATE_TOPOLOGY_DIR) + "/2pkg-2numa-8core-smt2-numa-gpus.xml";
const std::string kPackageGpus = std::string(ACCELERATE_TOPOLOGY_DIR) + "/2pkg-2numa-8core-smt2-package-gpus.xml";
const std::vector<std::string> kBusIds = {"0000:17:00.0", "0000:31:00.0", "0000:b1:00.0", "0000:ca:00.0"};

// PUs of NUMA domain d (cores 8d..8d+7 and their siblings).
std::vector<int> domain_pus(int d) { return concat(range(8 * d, 8 * d + 7), range(8 * d + 32, 8 * d + 39)); }
std::vector<int> all_pus() { return range(0, 63); }

const TopologyDescription& numa_gpus() {
  static const TopologyDescription topology = HwlocTopology::from_xml(kNumaGpus).describe();
  return topology;
}
const TopologyDescription& package_gpus() {
  static const TopologyDescription topology = HwlocTopology::from_xml(kPackageGpus).describe();
  return topology;
}

std::vector<std::string> gpus_for(int ranks) {
  std::vector<std::string> ids;
  for (int r = 0; r < ranks; ++r) ids.push_back(kBusIds[static_cast<std::size_t>(r % 4)]);
  return ids;
}

TEST(AffinityTopology, XmlIsDescribedAsTwoSocketsFourDomainsWithSmt) {
  const TopologyDescription& t = numa_gpus();
  EXPECT_EQ(t.numa_nodes, (std::vector<int>{0, 1, 2, 3}));
  ASSERT_EQ(t.cores.size(), 32u);
  for (int c = 0; c < 32; ++c) {
    EXPECT_EQ(t.cores[static_cast<std::size_t>(c)].pus, (std::vector<int>{c, c + 32}));
    EXPECT_EQ(t.cores[static_cast<std::size_t>(c)].domain, c / 8);
  }
  ASSERT_EQ(t.gpus.size(), 4u);
  for (int g = 0; g < 4; ++g) {
    EXPECT_TRUE(detail::same_pci_bus_id(t.gpus[static_cast<std::size_t>(g)].bus_id, kBusIds[static_cast<std::size_t>(g)]));
    EXPECT_EQ(t.gpus[static_cast<std::size_t>(g)].domains, (std::vector<int>{g}));
  }
  // Attached to packages, a GPU is local to both domains of its package.
  const TopologyDescription& p = package_gpus();
  ASSERT_EQ(p.gpus.size(), 4u);
  EXPECT_EQ(p.gpus[0].domains, (std::vector<int>{0, 1}));
  EXPECT_EQ(p.gpus[3].domains, (std::vector<int>{2, 3}));
}

TEST(AffinityTopology, MissingXmlFileIsAClearError) {
  const std::string message = accelerate::testing::error_of<Error>([] { HwlocTopology::from_xml("/nonexistent/topo.xml"); });
  EXPECT_NE(message.find("/nonexistent/topo.xml"), std::string::npos) << message;
}

// Every rank count 1-8, GPUs or not, full and restricted allowed sets.
TEST(AffinityTopology, InvariantsHoldForAllRankCountsAndAllowedSets) {
  const std::vector<std::pair<std::string, std::vector<int>>> allowed_sets = {
      {"whole node", all_pus()},
      {"package 1 only (cgroup)", concat(domain_pus(2), domain_pus(3))},
      {"one PU per core (SMT off)", range(0, 31)},
      {"srun --cpu-bind slice: cores 3-12", concat(range(3, 12), range(35, 44))},
      {"uneven: 6 cores of domain 0, 2 of domain 3", concat(concat(range(0, 5), range(32, 37)), {24, 25, 56, 57})},
  };
  for (const auto* topology : {&numa_gpus(), &package_gpus()}) {
    for (const auto& [name, allowed] : allowed_sets) {
      for (int ranks = 1; ranks <= 8; ++ranks) {
        for (bool with_gpus : {false, true}) {
          SCOPED_TRACE(name + ", " + std::to_string(ranks) + " ranks" + (with_gpus ? ", GPUs" : ""));
          NodeRequest request{allowed, ranks, with_gpus ? gpus_for(ranks) : std::vector<std::string>{}};
          const auto plan = detail::plan_node(*topology, request);
          testing::expect_valid_plan(*topology, request, plan);
          // Every rank computes the same plan: place_rank agrees with it.
          for (int r = 0; r < ranks; ++r) {
            detail::RankRequest rank_request{request, r, {}, AffinityPolicy::Respect};
            const auto mine = detail::place_rank(*topology, rank_request);
            EXPECT_EQ(mine.decision, AffinityDecision::Bound);
            EXPECT_EQ(mine.placement.cpus, plan[static_cast<std::size_t>(r)].cpus);
          }
        }
      }
    }
  }
}

TEST(AffinityTopology, WithoutGpusRanksFillDomainsInBlocks) {
  // 2 ranks: one package each.
  auto plan = detail::plan_node(numa_gpus(), {all_pus(), 2, {}});
  EXPECT_EQ(plan[0].cpus, concat(domain_pus(0), domain_pus(1)));
  EXPECT_EQ(plan[0].numa_nodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan[1].numa_nodes, (std::vector<int>{2, 3}));
  EXPECT_EQ(plan[1].cores, 16);

  // 8 ranks: two per domain, 4 cores (8 PUs) each, consecutive ranks together.
  plan = detail::plan_node(numa_gpus(), {all_pus(), 8, {}});
  EXPECT_EQ(plan[0].cpus, concat(range(0, 3), range(32, 35)));
  EXPECT_EQ(plan[1].cpus, concat(range(4, 7), range(36, 39)));
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(plan[static_cast<std::size_t>(r)].numa_nodes, (std::vector<int>{r / 2}));
    EXPECT_EQ(plan[static_cast<std::size_t>(r)].cores, 4);
  }

  // 6 ranks on 4 equal domains: 2, 2, 1, 1.
  plan = detail::plan_node(numa_gpus(), {all_pus(), 6, {}});
  const std::vector<int> expected_domain = {0, 0, 1, 1, 2, 3};
  const std::vector<int> expected_cores = {4, 4, 4, 4, 8, 8};
  for (std::size_t r = 0; r < 6; ++r) {
    EXPECT_EQ(plan[r].numa_nodes, (std::vector<int>{expected_domain[r]}));
    EXPECT_EQ(plan[r].cores, expected_cores[r]);
  }
}

TEST(AffinityTopology, RanksFollowTheirGpusNumaDomain) {
  // GPU r%4 for rank r, GPUs one per domain: rank r lands on domain r%4.
  for (int ranks : {1, 2, 3, 4, 8}) {
    const auto plan = detail::plan_node(numa_gpus(), {all_pus(), ranks, gpus_for(ranks)});
    for (int r = 0; r < ranks; ++r) {
      EXPECT_EQ(plan[static_cast<std::size_t>(r)].numa_nodes, (std::vector<int>{r % 4})) << ranks << " ranks, rank " << r;
      EXPECT_EQ(plan[static_cast<std::size_t>(r)].gpu_pci_bus_id, kBusIds[static_cast<std::size_t>(r % 4)]);
    }
  }
  // CUDA_VISIBLE_DEVICES=3,2,1,0 / per-task binding: the bus id decides, not the device index.
  const auto plan = detail::plan_node(numa_gpus(), {all_pus(), 2, {"0000:ca:00.0", "00000000:b1:00.0"}});
  EXPECT_EQ(plan[0].numa_nodes, (std::vector<int>{3}));
  EXPECT_EQ(plan[1].numa_nodes, (std::vector<int>{2}));
  EXPECT_EQ(plan[0].cpus, domain_pus(3));
  EXPECT_TRUE(plan[0].notes.empty());
}

TEST(AffinityTopology, TwoRanksOnOneGpuShareItsDomainDisjointly) {
  const auto plan = detail::plan_node(numa_gpus(), {all_pus(), 2, {kBusIds[1], kBusIds[1]}});
  EXPECT_EQ(plan[0].cpus, concat(range(8, 11), range(40, 43)));
  EXPECT_EQ(plan[1].cpus, concat(range(12, 15), range(44, 47)));
}

TEST(AffinityTopology, PackageLocalGpusSpreadOverThePackagesDomains) {
  // GPUs 0 and 1 are both local to package 0 (domains 0 and 1): one domain each.
  const auto plan = detail::plan_node(package_gpus(), {all_pus(), 4, gpus_for(4)});
  EXPECT_EQ(plan[0].numa_nodes, (std::vector<int>{0}));
  EXPECT_EQ(plan[1].numa_nodes, (std::vector<int>{1}));
  EXPECT_EQ(plan[2].numa_nodes, (std::vector<int>{2}));
  EXPECT_EQ(plan[3].numa_nodes, (std::vector<int>{3}));
}

TEST(AffinityTopology, GpuOutsideTheAllowedSetFallsBackInsideIt) {
  // The job's cgroup holds package 1 only, but the rank's GPU hangs off package 0.
  const std::vector<int> allowed = concat(domain_pus(2), domain_pus(3));
  const auto plan = detail::plan_node(numa_gpus(), {allowed, 2, {kBusIds[0], kBusIds[2]}});
  EXPECT_EQ(plan[1].numa_nodes, (std::vector<int>{2}));
  ASSERT_EQ(plan[0].notes.size(), 1u);
  EXPECT_NE(plan[0].notes[0].find("no allowed CPU is local to GPU 0000:17:00.0"), std::string::npos);
  EXPECT_EQ(plan[0].numa_nodes, (std::vector<int>{3}));  // the least loaded allowed domain
}

TEST(AffinityTopology, UnknownGpuIsPlacedByLoadWithANote) {
  const auto plan = detail::plan_node(numa_gpus(), {all_pus(), 2, {kBusIds[0], "0000:ee:00.0"}});
  EXPECT_EQ(plan[0].numa_nodes, (std::vector<int>{0}));
  EXPECT_EQ(plan[1].numa_nodes, (std::vector<int>{1}));
  ASSERT_EQ(plan[1].notes.size(), 1u);
  EXPECT_NE(plan[1].notes[0].find("0000:ee:00.0 is not in the hwloc topology"), std::string::npos);
}

TEST(AffinityTopology, RestrictedSetsNeverLeak) {
  // srun --cpu-bind slice cores 3-12: 2 ranks get cores 3-7 (domain 0) and 8-12 (domain 1).
  const std::vector<int> allowed = concat(range(3, 12), range(35, 44));
  const auto plan = detail::plan_node(numa_gpus(), {allowed, 2, {}});
  EXPECT_EQ(plan[0].cpus, concat(range(3, 7), range(35, 39)));
  EXPECT_EQ(plan[1].cpus, concat(range(8, 12), range(40, 44)));
  // SMT off (one PU per core allowed): a rank gets only the allowed sibling.
  const auto no_smt = detail::plan_node(numa_gpus(), {range(0, 31), 4, {}});
  EXPECT_EQ(no_smt[2].cpus, range(16, 23));
  EXPECT_EQ(no_smt[2].cores, 8);
}

TEST(AffinityTopology, RespectKeepsALauncherBindingAndOverrideReplacesIt) {
  const NodeRequest node{all_pus(), 2, {}};
  const std::vector<int> launcher_core = {5, 37};  // mpirun --bind-to core
  auto kept = detail::place_rank(numa_gpus(), {node, 1, launcher_core, AffinityPolicy::Respect});
  EXPECT_EQ(kept.decision, AffinityDecision::KeptLauncherBinding);
  EXPECT_EQ(kept.placement.cpus, launcher_core);
  EXPECT_EQ(kept.placement.numa_nodes, (std::vector<int>{0}));
  EXPECT_EQ(kept.placement.cores, 1);

  auto replaced = detail::place_rank(numa_gpus(), {node, 1, launcher_core, AffinityPolicy::Override});
  EXPECT_EQ(replaced.decision, AffinityDecision::Bound);
  EXPECT_EQ(replaced.placement.numa_nodes, (std::vector<int>{2, 3}));

  // Bound to everything allowed = not bound by a launcher: Respect binds.
  auto unbound = detail::place_rank(numa_gpus(), {node, 0, all_pus(), AffinityPolicy::Respect});
  EXPECT_EQ(unbound.decision, AffinityDecision::Bound);
  EXPECT_EQ(unbound.placement.numa_nodes, (std::vector<int>{0, 1}));

  auto off = detail::place_rank(numa_gpus(), {node, 0, launcher_core, AffinityPolicy::Off});
  EXPECT_EQ(off.decision, AffinityDecision::Disabled);
  EXPECT_EQ(off.placement.cpus, launcher_core);
}

}  // namespace
}  // namespace accelerate::ACCELERATE_TEST_FILE_ID
