#include "runtime/numa_affinity_placement.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <set>

#include "accelerate/error.hpp"
#include "accelerate/runtime/host.hpp"

namespace accelerate::detail {
namespace {

using Core = TopologyDescription::Core;

// "dddd:bb:dd.f" with the domain optional and of any width (CUDA and
// nvidia-smi print 4 or 8 hex digits).
std::optional<std::array<unsigned, 4>> parse_bus_id(std::string_view text) {
  std::array<unsigned, 4> parts{0, 0, 0, 0};
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ':' || text[i] == '.') {
      fields.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  if (fields.size() != 3 && fields.size() != 4) return std::nullopt;
  const std::size_t offset = 4 - fields.size();  // no domain given: domain 0
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const std::string_view f = fields[i];
    if (f.empty()) return std::nullopt;
    auto [end, error] = std::from_chars(f.data(), f.data() + f.size(), parts[i + offset], 16);
    if (error != std::errc() || end != f.data() + f.size()) return std::nullopt;
  }
  return parts;
}

std::vector<int> sorted_unique(std::vector<int> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

std::string describe_request(const NodeRequest& request) {
  return "allowed cpus " + format_cpu_list(sorted_unique(request.allowed_cpus)) + ", " +
         std::to_string(request.num_local_processes) + " local process(es)";
}

// The cores with at least one allowed PU, reduced to their allowed PUs.
std::vector<Core> usable_cores(const TopologyDescription& topology, const std::vector<int>& allowed) {
  const std::set<int> allowed_set(allowed.begin(), allowed.end());
  std::vector<Core> cores;
  for (const Core& core : topology.cores) {
    Core usable{{}, core.domain};
    for (int pu : core.pus) {
      if (allowed_set.count(pu) != 0) usable.pus.push_back(pu);
    }
    if (!usable.pus.empty()) cores.push_back(std::move(usable));
  }
  return cores;
}

// Ranks per domain, proportional to the domain's usable cores (D'Hondt:
// each next rank goes where cores/(ranks+1) is largest; ties to the lower
// domain), so equal domains get counts that differ by at most one.
std::vector<int> ranks_per_domain(const std::vector<int>& cores_per_domain, int ranks) {
  std::vector<int> counts(cores_per_domain.size(), 0);
  for (int r = 0; r < ranks; ++r) {
    std::size_t best = 0;
    for (std::size_t d = 1; d < counts.size(); ++d) {
      // cores[d]/(counts[d]+1) > cores[best]/(counts[best]+1), in integers.
      if (static_cast<long long>(cores_per_domain[d]) * (counts[best] + 1) >
          static_cast<long long>(cores_per_domain[best]) * (counts[d] + 1)) {
        best = d;
      }
    }
    ++counts[best];
  }
  return counts;
}

}  // namespace

bool same_pci_bus_id(std::string_view a, std::string_view b) {
  auto pa = parse_bus_id(a);
  auto pb = parse_bus_id(b);
  return pa && pb && *pa == *pb;
}

std::vector<Placement> plan_node(const TopologyDescription& topology, const NodeRequest& request) {
  const int ranks = request.num_local_processes;
  if (ranks < 1) {
    throw ConfigError("NUMA affinity: the number of local processes must be at least 1, got " + std::to_string(ranks) +
                      ".");
  }
  if (!request.gpu_bus_ids.empty() && static_cast<int>(request.gpu_bus_ids.size()) != ranks) {
    throw ConfigError("NUMA affinity: " + std::to_string(request.gpu_bus_ids.size()) +
                      " GPU PCI bus ids were given for " + std::to_string(ranks) +
                      " local processes; give one per local process (or none).");
  }
  const std::vector<Core> cores = usable_cores(topology, request.allowed_cpus);
  if (cores.empty()) {
    throw ConfigError("NUMA affinity: none of the " + describe_request(request) +
                      " belongs to a core of the topology; check the cpuset the job was given.");
  }

  const std::size_t num_domains = topology.numa_nodes.size();
  std::vector<std::vector<std::size_t>> cores_of_domain(num_domains);
  for (std::size_t c = 0; c < cores.size(); ++c) {
    const int d = cores[c].domain;
    if (d < 0 || static_cast<std::size_t>(d) >= num_domains) {
      throw ConfigError("NUMA affinity: the topology has a core outside every NUMA node.");
    }
    cores_of_domain[static_cast<std::size_t>(d)].push_back(c);
  }
  std::vector<int> usable_domains;  // domains with allowed cores, topology order
  for (std::size_t d = 0; d < num_domains; ++d) {
    if (!cores_of_domain[d].empty()) usable_domains.push_back(static_cast<int>(d));
  }
  const int usable = static_cast<int>(usable_domains.size());

  std::vector<Placement> plan(static_cast<std::size_t>(ranks));
  std::vector<std::vector<int>> domains_of_rank(static_cast<std::size_t>(ranks));

  if (!request.gpu_bus_ids.empty()) {
    // Each rank goes to a domain its GPU is local to; among several (a GPU
    // attached to a package), to the one holding the fewest ranks so far.
    // Ranks whose GPU has no allowed local CPU are placed last, by load.
    std::vector<int> load(num_domains, 0);
    std::vector<std::vector<int>> candidates(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      Placement& p = plan[static_cast<std::size_t>(r)];
      const std::string& bus_id = request.gpu_bus_ids[static_cast<std::size_t>(r)];
      p.gpu_pci_bus_id = bus_id;
      const auto gpu = std::find_if(topology.gpus.begin(), topology.gpus.end(),
                                    [&](const auto& g) { return same_pci_bus_id(g.bus_id, bus_id); });
      if (gpu == topology.gpus.end()) {
        p.notes.push_back("GPU " + bus_id + " is not in the hwloc topology; placed by load instead");
        continue;
      }
      for (int d : gpu->domains) {
        if (std::find(usable_domains.begin(), usable_domains.end(), d) != usable_domains.end()) {
          candidates[static_cast<std::size_t>(r)].push_back(d);
        }
      }
      if (candidates[static_cast<std::size_t>(r)].empty()) {
        p.notes.push_back("no allowed CPU is local to GPU " + bus_id + "; placed by load instead");
      }
    }
    for (bool local_pass : {true, false}) {
      for (int r = 0; r < ranks; ++r) {
        const auto& mine = candidates[static_cast<std::size_t>(r)];
        if (mine.empty() == local_pass) continue;
        const auto& from = local_pass ? mine : usable_domains;
        const int chosen = *std::min_element(from.begin(), from.end(), [&](int a, int b) {
          return load[static_cast<std::size_t>(a)] < load[static_cast<std::size_t>(b)];
        });
        ++load[static_cast<std::size_t>(chosen)];
        domains_of_rank[static_cast<std::size_t>(r)] = {chosen};
      }
    }
  } else if (ranks <= usable) {
    // Fewer ranks than domains: each rank gets a block of whole domains.
    for (int r = 0; r < ranks; ++r) {
      for (int i = r * usable / ranks; i < (r + 1) * usable / ranks; ++i) {
        domains_of_rank[static_cast<std::size_t>(r)].push_back(usable_domains[static_cast<std::size_t>(i)]);
      }
    }
  } else {
    // More ranks than domains: consecutive ranks fill one domain, then the next.
    std::vector<int> sizes;
    for (int d : usable_domains) sizes.push_back(static_cast<int>(cores_of_domain[static_cast<std::size_t>(d)].size()));
    const std::vector<int> counts = ranks_per_domain(sizes, ranks);
    int r = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      for (int k = 0; k < counts[i]; ++k) domains_of_rank[static_cast<std::size_t>(r++)] = {usable_domains[i]};
    }
  }

  // Split each domain's cores in contiguous blocks among the ranks sharing
  // it; a core is never divided, so SMT siblings stay with one rank.
  std::vector<std::vector<std::size_t>> cores_of_rank(static_cast<std::size_t>(ranks));
  for (std::size_t d = 0; d < num_domains; ++d) {
    std::vector<int> sharing;
    for (int r = 0; r < ranks; ++r) {
      const auto& mine = domains_of_rank[static_cast<std::size_t>(r)];
      if (std::find(mine.begin(), mine.end(), static_cast<int>(d)) != mine.end()) sharing.push_back(r);
    }
    const auto& domain_cores = cores_of_domain[d];
    const int n = static_cast<int>(sharing.size());
    const int c = static_cast<int>(domain_cores.size());
    for (int k = 0; k < n; ++k) {
      auto& mine = cores_of_rank[static_cast<std::size_t>(sharing[static_cast<std::size_t>(k)])];
      if (n <= c) {
        for (int i = k * c / n; i < (k + 1) * c / n; ++i) mine.push_back(domain_cores[static_cast<std::size_t>(i)]);
      } else {
        // More ranks than cores: cores must be shared; spread round-robin.
        mine.push_back(domain_cores[static_cast<std::size_t>(k % c)]);
        plan[static_cast<std::size_t>(sharing[static_cast<std::size_t>(k)])].notes.push_back(
            std::to_string(n) + " ranks share the " + std::to_string(c) + " allowed core(s) of NUMA node " +
            std::to_string(topology.numa_nodes[d]) + ": cores are oversubscribed");
      }
    }
  }

  for (int r = 0; r < ranks; ++r) {
    Placement& p = plan[static_cast<std::size_t>(r)];
    for (std::size_t c : cores_of_rank[static_cast<std::size_t>(r)]) {
      p.cpus.insert(p.cpus.end(), cores[c].pus.begin(), cores[c].pus.end());
    }
    p.cpus = sorted_unique(std::move(p.cpus));
    p.cores = static_cast<int>(cores_of_rank[static_cast<std::size_t>(r)].size());
    for (int d : domains_of_rank[static_cast<std::size_t>(r)]) {
      p.numa_nodes.push_back(topology.numa_nodes[static_cast<std::size_t>(d)]);
    }
    p.numa_nodes = sorted_unique(std::move(p.numa_nodes));
  }
  return plan;
}

RankPlacement place_rank(const TopologyDescription& topology, const RankRequest& request) {
  const int rank = request.local_process_index;
  if (rank < 0 || rank >= request.node.num_local_processes) {
    throw ConfigError("NUMA affinity: local process index " + std::to_string(rank) + " is outside [0, " +
                      std::to_string(request.node.num_local_processes) +
                      "); pass the index of this process among the processes of its node.");
  }
  const std::vector<int> allowed = sorted_unique(request.node.allowed_cpus);
  std::vector<int> current;
  std::set_intersection(request.current_binding.begin(), request.current_binding.end(), allowed.begin(), allowed.end(),
                        std::back_inserter(current));
  const bool launcher_bound = !current.empty() && current.size() < allowed.size();

  RankPlacement result;
  if (request.policy == AffinityPolicy::Off || (request.policy == AffinityPolicy::Respect && launcher_bound)) {
    // Report the binding as it is: its cores and the NUMA nodes they belong to.
    result.decision =
        request.policy == AffinityPolicy::Off ? AffinityDecision::Disabled : AffinityDecision::KeptLauncherBinding;
    const std::vector<int>& cpus = current.empty() ? allowed : current;
    Placement& p = result.placement;
    p.cpus = cpus;
    std::vector<int> domains;
    for (const Core& core : usable_cores(topology, cpus)) {
      ++p.cores;
      domains.push_back(topology.numa_nodes.at(static_cast<std::size_t>(core.domain)));
    }
    p.numa_nodes = sorted_unique(std::move(domains));
    if (!request.node.gpu_bus_ids.empty()) {
      p.gpu_pci_bus_id = request.node.gpu_bus_ids.at(static_cast<std::size_t>(rank));
    }
    return result;
  }
  result.decision = AffinityDecision::Bound;
  result.placement = plan_node(topology, request.node).at(static_cast<std::size_t>(rank));
  return result;
}

}  // namespace accelerate::detail
