#include "runtime/numa_affinity_topology.hpp"

#include <hwloc.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "accelerate/error.hpp"
#include "accelerate/runtime/host.hpp"

namespace accelerate::detail {
namespace {

struct BitmapFree {
  void operator()(hwloc_bitmap_s* bitmap) const noexcept { hwloc_bitmap_free(bitmap); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapFree>;

Bitmap new_bitmap() {
  Bitmap bitmap(hwloc_bitmap_alloc());
  if (!bitmap) throw Error("NUMA affinity: out of memory allocating an hwloc bitmap.");
  return bitmap;
}

std::vector<int> to_list(hwloc_const_bitmap_t bitmap) {
  std::vector<int> out;
  if (bitmap == nullptr) return out;
  for (int i = hwloc_bitmap_first(bitmap); i != -1; i = hwloc_bitmap_next(bitmap, i)) out.push_back(i);
  return out;
}

Bitmap from_list(const std::vector<int>& indices) {
  Bitmap bitmap = new_bitmap();
  for (int i : indices) hwloc_bitmap_set(bitmap.get(), static_cast<unsigned>(i));
  return bitmap;
}

[[noreturn]] void throw_hwloc(const std::string& what) {
  throw Error("NUMA affinity: " + what + " failed: " + std::strerror(errno) +
              ". Run with ACCELERATE_CPU_AFFINITY=0 (or policy off) to start without binding.");
}

hwloc_topology_t init_topology() {
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) throw_hwloc("hwloc_topology_init");
  return topology;
}

void load(hwloc_topology_t topology, const std::string& what) {
  if (hwloc_topology_load(topology) != 0) {
    const int saved = errno;
    hwloc_topology_destroy(topology);
    errno = saved;
    throw_hwloc("loading the topology of " + what);
  }
}

// Display controllers and 3D controllers (PCI base class 03): GPUs.
bool is_gpu(hwloc_obj_t pci) { return (pci->attr->pcidev.class_id >> 8) == 0x03; }

}  // namespace

HwlocTopology HwlocTopology::system(bool with_pci) {
  hwloc_topology_t topology = init_topology();
  if (with_pci) hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  load(topology, "this machine");
  return HwlocTopology(topology);
}

HwlocTopology HwlocTopology::from_xml(const std::string& path) {
  hwloc_topology_t topology = init_topology();
  hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_set_xml(topology, path.c_str()) != 0) {
    const int saved = errno;
    hwloc_topology_destroy(topology);
    errno = saved;
    throw_hwloc("reading the hwloc XML file '" + path + "'");
  }
  load(topology, "'" + path + "'");
  return HwlocTopology(topology);
}

HwlocTopology::~HwlocTopology() {
  if (topology_ != nullptr) hwloc_topology_destroy(topology_);
}

HwlocTopology::HwlocTopology(HwlocTopology&& other) noexcept : topology_(other.topology_) { other.topology_ = nullptr; }

TopologyDescription HwlocTopology::describe() const {
  TopologyDescription out;
  const int numa_count = hwloc_get_nbobjs_by_type(topology_, HWLOC_OBJ_NUMANODE);
  std::vector<hwloc_obj_t> numa;
  for (int i = 0; i < numa_count; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(topology_, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    numa.push_back(node);
    out.numa_nodes.push_back(static_cast<int>(node->os_index));
  }
  auto domain_of = [&](hwloc_const_cpuset_t cpuset) {
    for (std::size_t d = 0; d < numa.size(); ++d) {
      if (hwloc_bitmap_intersects(cpuset, numa[d]->cpuset) != 0) return static_cast<int>(d);
    }
    return -1;
  };

  // Cores, or PUs standing alone where the OS reports no cores.
  const bool have_cores = hwloc_get_nbobjs_by_type(topology_, HWLOC_OBJ_CORE) > 0;
  const hwloc_obj_type_t unit = have_cores ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  for (hwloc_obj_t obj = hwloc_get_next_obj_by_type(topology_, unit, nullptr); obj != nullptr;
       obj = hwloc_get_next_obj_by_type(topology_, unit, obj)) {
    TopologyDescription::Core core;
    core.pus = to_list(obj->cpuset);
    core.domain = domain_of(obj->cpuset);
    if (!core.pus.empty()) out.cores.push_back(std::move(core));
  }

  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topology_, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topology_, pci)) {
    if (!is_gpu(pci)) continue;
    char bus_id[32];
    std::snprintf(bus_id, sizeof bus_id, "%04x:%02x:%02x.%01x", static_cast<unsigned>(pci->attr->pcidev.domain),
                  static_cast<unsigned>(pci->attr->pcidev.bus), static_cast<unsigned>(pci->attr->pcidev.dev),
                  static_cast<unsigned>(pci->attr->pcidev.func));
    TopologyDescription::PciDevice gpu{bus_id, {}};
    hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topology_, pci);
    for (std::size_t d = 0; local != nullptr && d < numa.size(); ++d) {
      if (hwloc_bitmap_intersects(local->nodeset, numa[d]->nodeset) != 0) gpu.domains.push_back(static_cast<int>(d));
    }
    out.gpus.push_back(std::move(gpu));
  }
  return out;
}

std::vector<int> HwlocTopology::allowed_cpus() const { return to_list(hwloc_topology_get_allowed_cpuset(topology_)); }

std::vector<int> HwlocTopology::current_binding() const {
  Bitmap set = new_bitmap();
  if (hwloc_get_cpubind(topology_, set.get(), HWLOC_CPUBIND_PROCESS) != 0) {
    throw_hwloc("hwloc_get_cpubind (reading the process binding)");
  }
  return to_list(set.get());
}

void HwlocTopology::bind_cpus(const std::vector<int>& cpus) const {
  const Bitmap cpuset = from_list(cpus);
  if (hwloc_set_cpubind(topology_, cpuset.get(), HWLOC_CPUBIND_PROCESS | HWLOC_CPUBIND_STRICT) != 0 &&
      hwloc_set_cpubind(topology_, cpuset.get(), HWLOC_CPUBIND_PROCESS) != 0) {
    throw_hwloc("hwloc_set_cpubind to PUs " + format_cpu_list(cpus));
  }
}

void HwlocTopology::bind_memory(const std::vector<int>& numa_nodes) const {
  const Bitmap nodeset = from_list(numa_nodes);
  // No PROCESS flag: on Linux the memory policy is per thread and inherited
  // by the threads created afterwards, which is why binding comes first.
  if (hwloc_set_membind(topology_, nodeset.get(), HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET) != 0) {
    throw_hwloc("hwloc_set_membind to the NUMA node(s) chosen");
  }
}

std::string HwlocTopology::memory_policy() const {
  Bitmap nodeset = new_bitmap();
  hwloc_membind_policy_t policy = HWLOC_MEMBIND_DEFAULT;
  if (hwloc_get_membind(topology_, nodeset.get(), &policy, HWLOC_MEMBIND_BYNODESET) != 0) return "unknown";
  std::string nodes;
  for (int n : to_list(nodeset.get())) nodes += (nodes.empty() ? "" : ",") + std::to_string(n);
  switch (policy) {
    case HWLOC_MEMBIND_BIND: return "bind to NUMA " + nodes;
    case HWLOC_MEMBIND_INTERLEAVE: return "interleave over NUMA " + nodes;
    case HWLOC_MEMBIND_FIRSTTOUCH: return "first touch";
    case HWLOC_MEMBIND_DEFAULT: return "default";
    default: return "policy " + std::to_string(static_cast<int>(policy)) + " on NUMA " + nodes;
  }
}

}  // namespace accelerate::detail
