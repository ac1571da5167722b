// hwloc side of NUMA affinity: load a topology (this machine or an XML
// file), describe it for the placement logic, read and set bindings.
// Compiled only when hwloc is built in (ACCELERATE_HAVE_HWLOC).
#pragma once

#include <string>
#include <vector>

#include "runtime/numa_affinity_placement.hpp"

struct hwloc_topology;

namespace accelerate::detail {

class HwlocTopology {
 public:
  /// This machine. `with_pci` also discovers PCI devices (to find GPUs).
  static HwlocTopology system(bool with_pci);
  /// A topology saved with `lstopo --of xml` (with its PCI devices).
  static HwlocTopology from_xml(const std::string& path);

  ~HwlocTopology();
  HwlocTopology(HwlocTopology&& other) noexcept;
  HwlocTopology& operator=(HwlocTopology&&) = delete;
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;

  /// NUMA domains, cores with their PUs, and GPU-class PCI devices with the
  /// domains they are local to.
  [[nodiscard]] TopologyDescription describe() const;
  /// PUs the process may use (cgroup cpuset), ascending.
  [[nodiscard]] std::vector<int> allowed_cpus() const;
  /// PUs the whole process is bound to now, ascending.
  [[nodiscard]] std::vector<int> current_binding() const;
  /// Binds every thread of the process to `cpus` (strictly where the OS
  /// allows). Throws Error with the OS's reason.
  void bind_cpus(const std::vector<int>& cpus) const;
  /// Binds the calling thread's memory policy to `numa_nodes`; threads it
  /// creates afterwards inherit it.
  void bind_memory(const std::vector<int>& numa_nodes) const;
  /// The memory policy of the calling thread, e.g. "bind to NUMA 1", "default".
  [[nodiscard]] std::string memory_policy() const;

 private:
  explicit HwlocTopology(hwloc_topology* topology) noexcept : topology_(topology) {}
  hwloc_topology* topology_;
};

}  // namespace accelerate::detail
