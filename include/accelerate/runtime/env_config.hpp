// Every ACCELERATE_* environment variable the library reads, parsed and
// validated in one place. docs/environment-variables.md documents each one.
//
// Values here override the defaults of the corresponding options, as the
// environment does in Accelerate (the launcher exports them for every rank).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace accelerate {

struct EnvConfig {
  std::optional<std::string> mixed_precision;  ///< ACCELERATE_MIXED_PRECISION: no | fp16 | bf16
  // Unset variables are nullopt (not false), so that a setting the
  // environment does not give falls through to the configuration file.
  std::optional<bool> debug_mode;                  ///< ACCELERATE_DEBUG_MODE: cross-rank checks before collectives
  std::optional<bool> shared_memory_all_reduce;    ///< ACCELERATE_SHM_ALLREDUCE: CPU all_reduce through shared memory
  std::optional<bool> use_cpu;                     ///< ACCELERATE_USE_CPU: force the CPU device
  std::optional<bool> cpu_affinity;                ///< ACCELERATE_CPU_AFFINITY: bind ranks to NUMA domains
  std::optional<int> gradient_accumulation_steps;  ///< ACCELERATE_GRADIENT_ACCUMULATION_STEPS
  std::optional<std::string> log_level;            ///< ACCELERATE_LOG_LEVEL: debug | info | warning | error
  std::optional<std::chrono::seconds> timeout;     ///< ACCELERATE_TIMEOUT: collective timeout in seconds
  std::optional<std::string>
      mpi_thread_level;  ///< ACCELERATE_MPI_THREAD_LEVEL: single | funneled | serialized | multiple
  std::optional<int> emulated_ranks_per_node;  ///< ACCELERATE_EMULATED_RANKS_PER_NODE: split a host into virtual nodes
  /// ACCELERATE_PREEMPTION_SIGNALS: signals that request checkpoint-and-stop, e.g. USR1,TERM
  std::optional<std::vector<int>> preemption_signals;

  /// Reads and validates the variables; throws ConfigError naming the first bad one.
  static EnvConfig from_environment();
};

}  // namespace accelerate
