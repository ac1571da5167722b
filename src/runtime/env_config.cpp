#include "accelerate/runtime/env_config.hpp"

#include "accelerate/runtime/environment.hpp"
#include "accelerate/runtime/preemption.hpp"

namespace accelerate {

EnvConfig EnvConfig::from_environment() {
  EnvConfig config;
  config.mixed_precision = env_choice("ACCELERATE_MIXED_PRECISION", {"no", "fp16", "bf16"});
  config.debug_mode = env_bool("ACCELERATE_DEBUG_MODE");
  config.shared_memory_all_reduce = env_bool("ACCELERATE_SHM_ALLREDUCE");
  config.use_cpu = env_bool("ACCELERATE_USE_CPU");
  config.cpu_affinity = env_bool("ACCELERATE_CPU_AFFINITY");
  if (auto steps = env_int("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", 1, 1 << 30)) {
    config.gradient_accumulation_steps = static_cast<int>(*steps);
  }
  config.log_level = env_choice("ACCELERATE_LOG_LEVEL", {"debug", "info", "warning", "error"});
  if (auto seconds = env_int("ACCELERATE_TIMEOUT", 1, 7 * 24 * 3600)) {
    config.timeout = std::chrono::seconds(*seconds);
  }
  config.mpi_thread_level = env_choice("ACCELERATE_MPI_THREAD_LEVEL", {"single", "funneled", "serialized", "multiple"});
  if (auto ranks = env_int("ACCELERATE_EMULATED_RANKS_PER_NODE", 1, 1 << 20)) {
    config.emulated_ranks_per_node = static_cast<int>(*ranks);
  }
  if (auto signals = get_env("ACCELERATE_PREEMPTION_SIGNALS"); signals && !signals->empty()) {
    config.preemption_signals = parse_signal_list(*signals, "ACCELERATE_PREEMPTION_SIGNALS");
  }
  return config;
}

}  // namespace accelerate
