// The pure part of NUMA affinity: given a description of a node's topology,
// the CPUs the process may use and the node's ranks, decide which PUs and
// NUMA nodes each rank gets. No hwloc, no system calls: every rank computes
// the same plan from the same inputs, and tests feed synthetic topologies.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "accelerate/runtime/numa_affinity.hpp"

namespace accelerate::detail {

/// A node as the placement sees it. Indices into `numa_nodes` are "domains".
struct TopologyDescription {
  struct Core {
    std::vector<int> pus;  ///< OS indices of its hardware threads (SMT siblings)
    int domain = -1;       ///< index into numa_nodes
  };
  struct PciDevice {
    std::string bus_id;        ///< "dddd:bb:dd.f"
    std::vector<int> domains;  ///< NUMA domains it is local to (indices into numa_nodes)
  };
  std::vector<int> numa_nodes;  ///< OS index of each NUMA domain
  std::vector<Core> cores;      ///< in topology order
  std::vector<PciDevice> gpus;  ///< GPU-class PCI devices
};

/// One rank's share of the node.
struct Placement {
  std::vector<int> cpus;        ///< PU OS indices, ascending
  std::vector<int> numa_nodes;  ///< NUMA OS indices, ascending
  int cores = 0;
  std::optional<std::string> gpu_pci_bus_id;
  std::vector<std::string> notes;
};

struct NodeRequest {
  std::vector<int> allowed_cpus;  ///< PUs the processes may use
  int num_local_processes = 1;
  std::vector<std::string> gpu_bus_ids;  ///< per local rank, or empty (no GPUs)
};

/// Placement of every local rank. Throws ConfigError on inconsistent input
/// (no allowed CPU in the topology, wrong number of GPU ids, …).
std::vector<Placement> plan_node(const TopologyDescription& topology, const NodeRequest& request);

struct RankRequest {
  NodeRequest node;
  int local_process_index = 0;
  std::vector<int> current_binding;  ///< PUs the process is bound to now (empty: unknown)
  AffinityPolicy policy = AffinityPolicy::Respect;
};

struct RankPlacement {
  AffinityDecision decision = AffinityDecision::Disabled;
  Placement placement;
};

/// This rank's placement under the policy: the plan's share (Bound), the
/// launcher's binding when it is a strict subset of the allowed CPUs and the
/// policy is Respect (KeptLauncherBinding), or the current binding (Off).
RankPlacement place_rank(const TopologyDescription& topology, const RankRequest& request);

/// True when `a` and `b` name the same PCI function ("0000:17:00.0" ==
/// "00000000:17:00.0" == "17:00.0"); false when either does not parse.
bool same_pci_bus_id(std::string_view a, std::string_view b);

}  // namespace accelerate::detail
