// Public NUMA affinity API: gathers the inputs (local rank, GPUs, allowed
// CPUs, current binding), runs the placement, applies it and caches it.
#include "accelerate/runtime/numa_affinity.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/env_config.hpp"
#include "accelerate/runtime/host.hpp"
#include "accelerate/runtime/launcher.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/state.hpp"
#include "detail/deadline_comm.hpp"
#include "runtime/device_probe.hpp"
#include "runtime/numa_affinity_cache.hpp"
#include "runtime/numa_affinity_gpu.hpp"
#include "runtime/numa_affinity_placement.hpp"
#if ACCELERATE_HAVE_HWLOC
#include "runtime/numa_affinity_topology.hpp"
#endif

namespace accelerate {
namespace {

std::mutex cache_mutex;
std::optional<NumaBinding> cache;

std::string join(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

// The GPU of every local rank when all ranks see the same devices and rank
// r drives device r % count (State's choice); empty on CPU-only ranks.
std::vector<std::string> gpu_ids_from_local_view(int num_local) {
  if (EnvConfig::from_environment().use_cpu.value_or(false) || detail::visible_cuda_devices() == 0) return {};
  const std::vector<std::string> visible = detail::visible_gpu_pci_bus_ids();
  if (visible.empty()) return {};
  std::vector<std::string> ids;
  for (int r = 0; r < num_local; ++r) ids.push_back(visible[static_cast<std::size_t>(r) % visible.size()]);
  return ids;
}

// Every local rank's GPU bus id, all-gathered on the node (under per-task
// GPU binding each rank sees only its own GPU). Empty unless every rank has one.
std::vector<std::string> gpu_ids_from_node(const State& state) {
  constexpr int width = 32;
  std::string mine(width, '\0');
  if (state.device().is_cuda()) {
    const auto index = static_cast<std::size_t>(state.device().index());
    const std::vector<std::string> visible = detail::visible_gpu_pci_bus_ids();
    if (index < visible.size()) {
      const std::string& id = visible[index];
      std::copy_n(id.begin(), std::min<std::size_t>(id.size(), width - 1), mine.begin());
    }
  }
  std::string all(static_cast<std::size_t>(width * state.num_local_processes()), '\0');
  detail::DeadlineComm(state.node_comm(), state.timeout())
      .all_gather_bytes(mine.data(), width, all.data(), "set_numa_affinity (all-gather of GPU bus ids)");
  std::vector<std::string> ids;
  for (int r = 0; r < state.num_local_processes(); ++r) {
    std::string id(all.c_str() + static_cast<std::ptrdiff_t>(r) * width);
    if (id.empty()) return {};
    ids.push_back(std::move(id));
  }
  return ids;
}

// [[maybe_unused]]: builds without hwloc never bind.
[[maybe_unused]] int intra_op_threads_for(const NumaAffinityOptions& options, int cores,
                                          std::vector<std::string>& notes) {
  if (options.intra_op_threads) return *options.intra_op_threads;
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp != nullptr && *omp != '\0') {
    notes.push_back(std::string("OMP_NUM_THREADS=") + omp + " decides the LibTorch thread count");
    return 0;
  }
  return cores > 0 ? cores : 0;
}

[[maybe_unused]] void log_binding(const NumaBinding& binding) {
  std::cerr << "[accelerate] " << detail::where() << " NUMA affinity: " << binding.describe() << '\n' << std::flush;
}

// Computes, applies and caches the binding of this process.
NumaBinding apply(const NumaAffinityOptions& options, int local, int num_local, std::vector<std::string> gpu_ids,
                  bool use_cache) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (use_cache && cache) return *cache;
#if !ACCELERATE_HAVE_HWLOC
  (void)options, (void)local, (void)num_local, (void)gpu_ids;
  detail::throw_feature_not_built("hwloc", "set_numa_affinity", "ACCELERATE_WITH_HWLOC");
#else
  const detail::HwlocTopology topology = detail::HwlocTopology::system(!gpu_ids.empty());
  detail::RankRequest request;
  request.node.allowed_cpus = topology.allowed_cpus();
  request.node.num_local_processes = num_local;
  request.node.gpu_bus_ids = std::move(gpu_ids);
  request.local_process_index = local;
  request.current_binding = topology.current_binding();
  request.policy = options.policy;
  const detail::RankPlacement placed = detail::place_rank(topology.describe(), request);

  NumaBinding binding;
  binding.decision = placed.decision;
  binding.local_process_index = local;
  binding.num_local_processes = num_local;
  binding.cpus = placed.placement.cpus;
  binding.numa_nodes = placed.placement.numa_nodes;
  binding.cores = placed.placement.cores;
  binding.gpu_pci_bus_id = placed.placement.gpu_pci_bus_id;
  binding.notes = placed.placement.notes;

  if (binding.decision != AffinityDecision::Disabled) {
    const std::vector<int> memory = options.bind_memory ? binding.numa_nodes : std::vector<int>{};
    if (binding.decision == AffinityDecision::Bound) {
      topology.bind_cpus(binding.cpus);
    }
    if (!memory.empty()) topology.bind_memory(memory);
    binding.intra_op_threads = intra_op_threads_for(options, binding.cores, binding.notes);
    if (binding.intra_op_threads > 0) at::set_num_threads(binding.intra_op_threads);
  }
  if (options.verbose.value_or(EnvConfig::from_environment().debug_mode.value_or(false))) log_binding(binding);
  // Policy off changed nothing, so there is nothing to remember.
  if (binding.decision != AffinityDecision::Disabled) cache = binding;
  return binding;
#endif
}

NumaBinding from_launcher(NumaAffinityOptions options) {
  const LauncherInfo launcher = detect_launcher();
  const int local = options.local_process_index.value_or(launcher.local_rank.value_or(0));
  const int num_local = options.num_local_processes.value_or(launcher.local_size.value_or(1));
  std::vector<std::string> gpu_ids = options.gpu_pci_bus_ids;
  if (gpu_ids.empty() && options.policy != AffinityPolicy::Off) gpu_ids = gpu_ids_from_local_view(num_local);
  return apply(options, local, num_local, std::move(gpu_ids), options.policy != AffinityPolicy::Override);
}

}  // namespace

std::string_view to_string(AffinityPolicy policy) {
  switch (policy) {
    case AffinityPolicy::Respect: return "respect";
    case AffinityPolicy::Override: return "override";
    case AffinityPolicy::Off: return "off";
  }
  return "?";
}

AffinityPolicy parse_affinity_policy(std::string_view text) {
  if (text == "respect") return AffinityPolicy::Respect;
  if (text == "override") return AffinityPolicy::Override;
  if (text == "off") return AffinityPolicy::Off;
  throw ConfigError("NUMA affinity policy '" + std::string(text) + "' is not one of respect, override, off.");
}

std::string_view to_string(AffinityDecision decision) {
  switch (decision) {
    case AffinityDecision::Bound: return "bound";
    case AffinityDecision::KeptLauncherBinding: return "kept launcher binding";
    case AffinityDecision::Disabled: return "unchanged (policy off)";
  }
  return "?";
}

std::string NumaBinding::describe() const {
  std::string text = "local " + std::to_string(local_process_index) + "/" + std::to_string(num_local_processes) +
                     ": cpus " + format_cpu_list(cpus) + " (" + std::to_string(cores) + " core" +
                     (cores == 1 ? "" : "s") + ") numa " + join(numa_nodes) + " threads " +
                     (intra_op_threads > 0 ? std::to_string(intra_op_threads) : std::string("unchanged")) + " [" +
                     std::string(to_string(decision));
  if (gpu_pci_bus_id) text += ", gpu " + *gpu_pci_bus_id;
  text += "]";
  for (const std::string& note : notes) text += "; " + note;
  return text;
}

NumaBinding set_numa_affinity(int local_process_index, std::optional<bool> verbose) {
  NumaAffinityOptions options;
  options.local_process_index = local_process_index;
  options.verbose = verbose;
  return set_numa_affinity(options);
}

NumaBinding override_numa_affinity(int local_process_index, std::optional<bool> verbose) {
  NumaAffinityOptions options;
  options.policy = AffinityPolicy::Override;
  options.local_process_index = local_process_index;
  options.verbose = verbose;
  return set_numa_affinity(options);
}

NumaBinding set_numa_affinity(const NumaAffinityOptions& options) { return from_launcher(options); }

NumaBinding set_numa_affinity(const State& state, NumaAffinityOptions options) {
  const bool use_cache = options.policy != AffinityPolicy::Override;
  if (use_cache) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache) return *cache;
  }
  std::vector<std::string> gpu_ids = options.gpu_pci_bus_ids;
  if (gpu_ids.empty() && !state.use_cpu()) gpu_ids = gpu_ids_from_node(state);
  return apply(options, state.local_process_index(), state.num_local_processes(), std::move(gpu_ids), use_cache);
}

std::optional<NumaBinding> apply_configured_numa_affinity(const State& state, std::optional<bool> enabled) {
  if (!enabled.value_or(EnvConfig::from_environment().cpu_affinity.value_or(false))) return std::nullopt;
  return set_numa_affinity(state);
}

std::optional<NumaBinding> cached_numa_affinity() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  return cache;
}

namespace detail {
void reset_numa_affinity_cache() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  cache.reset();
}
}  // namespace detail

std::string describe_current_binding() {
  std::string text;
#if ACCELERATE_HAVE_HWLOC
  const detail::HwlocTopology topology = detail::HwlocTopology::system(false);
  detail::RankRequest request;
  request.node.allowed_cpus = topology.allowed_cpus();
  request.current_binding = topology.current_binding();
  request.policy = AffinityPolicy::Off;
  const detail::Placement now = detail::place_rank(topology.describe(), request).placement;
  text = "cpus " + format_cpu_list(now.cpus) + " (" + std::to_string(now.cores) + " core" +
         (now.cores == 1 ? "" : "s") + " of " + format_cpu_list(request.node.allowed_cpus) + " allowed) numa " +
         join(now.numa_nodes) + ", memory " + topology.memory_policy();
#else
  text = "cpus " + format_cpu_list(allowed_cpus()) + " (NUMA placement unavailable: built without hwloc)";
#endif
  if (auto binding = cached_numa_affinity()) {
    text += ", set_numa_affinity: " + std::string(to_string(binding->decision));
    if (binding->intra_op_threads > 0) text += ", " + std::to_string(binding->intra_op_threads) + " torch threads";
  } else {
    text += ", set_numa_affinity not called";
  }
  return text;
}

}  // namespace accelerate
