// NUMA affinity: bind each rank to the cores and memory of "its" NUMA domain
// (Accelerate's set_numa_affinity / override_numa_affinity, done with hwloc).
//
// Placement rules (docs/affinity.md):
//   - with GPUs, a rank goes to the NUMA domain its GPU is attached to, found
//     by PCI bus id, so CUDA_VISIBLE_DEVICES remapping and per-task GPU
//     binding by the scheduler are honoured;
//   - without GPUs, the node's ranks are spread over the NUMA domains in
//     blocks (consecutive local ranks share a domain);
//   - the cores of a domain are split disjointly among the ranks that share
//     it, SMT siblings (hardware threads of one core) staying together;
//   - everything is intersected with the CPUs the process is allowed to use
//     (cgroups / cpusets); nothing is ever bound outside that set;
//   - a binding the launcher already made (srun --cpu-bind, mpirun
//     --bind-to) is kept under the default policy Respect.
// Memory is bound to the chosen domains and LibTorch's intra-op thread count
// is set to the number of cores received. Call it first thing in main(),
// before any thread exists: the memory policy is inherited only by threads
// created afterwards. The first result is cached for the life of the process.
//
// Builds without hwloc throw FeatureNotBuilt from every function that binds.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelerate {

class State;

/// What to do when the launcher has already bound this process.
enum class AffinityPolicy {
  Respect,   ///< keep an existing launcher binding; bind only unbound processes
  Override,  ///< replace any existing binding with the computed one
  Off,       ///< change nothing (the result only reports the current binding)
};

std::string_view to_string(AffinityPolicy policy);

/// Parses "respect" | "override" | "off"; throws ConfigError otherwise.
AffinityPolicy parse_affinity_policy(std::string_view text);

struct NumaAffinityOptions {
  AffinityPolicy policy = AffinityPolicy::Respect;
  /// Log the resulting mask on every rank. Default: ACCELERATE_DEBUG_MODE.
  std::optional<bool> verbose;
  /// Index of this process among the processes of its node, and their
  /// number. When unset they come from the launcher's environment (Open MPI,
  /// Slurm, Hydra, PALS); the State overload takes them from State.
  std::optional<int> local_process_index;
  std::optional<int> num_local_processes;
  /// PCI bus id ("0000:17:00.0") of the GPU each local rank drives, indexed
  /// by local rank. Empty: asked from the CUDA runtime when CUDA is built in
  /// and a GPU is visible (the State overload all-gathers every rank's id on
  /// the node, which is needed under per-task GPU binding), else no GPUs.
  std::vector<std::string> gpu_pci_bus_ids;
  /// Bind memory allocations to the chosen NUMA domain(s) too.
  bool bind_memory = true;
  /// LibTorch intra-op threads: unset = the number of cores received, unless
  /// OMP_NUM_THREADS is set (then the user's choice stands); 0 = leave alone.
  std::optional<int> intra_op_threads;
};

/// Why the process ended up with the binding it has.
enum class AffinityDecision {
  Bound,                ///< bound to the computed placement
  KeptLauncherBinding,  ///< policy Respect and the launcher had already bound it
  Disabled,             ///< policy Off: nothing changed
};

std::string_view to_string(AffinityDecision decision);

/// The binding of one rank.
struct NumaBinding {
  AffinityDecision decision = AffinityDecision::Disabled;
  int local_process_index = 0;
  int num_local_processes = 1;
  std::vector<int> cpus;                      ///< OS indices of the PUs (hardware threads), ascending
  std::vector<int> numa_nodes;                ///< OS indices of the NUMA nodes memory is bound to
  int cores = 0;                              ///< physical cores in `cpus`
  int intra_op_threads = 0;                   ///< LibTorch threads set (0: left alone)
  std::optional<std::string> gpu_pci_bus_id;  ///< the GPU that decided the domain
  std::vector<std::string> notes;             ///< fallbacks taken (oversubscription, GPU not found, …)

  /// One line: "local 1/4: cpus 8-15,40-47 (8 cores) numa 1 threads 8 [bound, gpu 0000:31:00.0]".
  [[nodiscard]] std::string describe() const;
};

/// Seeds' set_numa_affinity: computes this process's placement (policy
/// Respect), applies it, and caches it; later calls return the cached
/// binding without touching the process again.
NumaBinding set_numa_affinity(int local_process_index, std::optional<bool> verbose = std::nullopt);

/// Seeds' override_numa_affinity: recomputes with policy Override, applies,
/// and replaces the cached binding.
NumaBinding override_numa_affinity(int local_process_index, std::optional<bool> verbose = std::nullopt);

/// Richer form: placement per `options`; cached like set_numa_affinity
/// unless the policy is Override.
NumaBinding set_numa_affinity(const NumaAffinityOptions& options);

/// Collective over state.node_comm(): local rank and size come from State,
/// and every rank's GPU bus id is all-gathered on the node, so per-task GPU
/// binding (each rank sees only its own GPU) places ranks correctly.
NumaBinding set_numa_affinity(const State& state, NumaAffinityOptions options = {});

/// Binds when `enabled` says so, or, when it is unset, when
/// ACCELERATE_CPU_AFFINITY=1 (State overload, policy Respect, so collective
/// over the node when it binds); returns nullopt when it does not bind.
std::optional<NumaBinding> apply_configured_numa_affinity(const State& state,
                                                          std::optional<bool> enabled = std::nullopt);

/// The cached binding, if set_numa_affinity ran in this process.
std::optional<NumaBinding> cached_numa_affinity();

/// Printable description of this process's current binding, read back from
/// the operating system (for `accelerate-hpc env`): the PUs it may run on,
/// their cores and NUMA nodes, the memory policy, and whether
/// set_numa_affinity bound it. Works without hwloc (then says so).
std::string describe_current_binding();

}  // namespace accelerate
