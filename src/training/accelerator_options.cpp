#include "accelerate/training/accelerator_options.hpp"

#include <string>

#include "accelerate/error.hpp"
#include "accelerate/runtime/config_file.hpp"
#include "accelerate/runtime/env_config.hpp"

namespace accelerate {
namespace {

constexpr std::chrono::seconds kDefaultTimeout{1800};

}  // namespace

ResolvedSettings resolve_settings(const AcceleratorOptions& options, const EnvConfig& environment,
                                  const ConfigFile* config_file) {
  static const ConfigFile kNoFile;
  const ConfigFile& file = config_file != nullptr ? *config_file : kNoFile;
  ResolvedSettings settings;

  // explicit option > environment > file > default, one setting per line;
  // the environment's values are nullopt when unset, so they fall through.
  settings.cpu = options.cpu.value_or(environment.use_cpu.value_or(file.use_cpu.value_or(false)));
  settings.numa_affinity =
      options.numa_affinity.value_or(environment.cpu_affinity.value_or(file.cpu_affinity.value_or(false)));
  settings.mixed_precision = parse_mixed_precision(
      options.mixed_precision.value_or(environment.mixed_precision.value_or(file.mixed_precision.value_or("no"))));

  if (options.gradient_accumulation_steps && options.gradient_accumulation_plugin) {
    throw ConfigError("Accelerator: both gradient_accumulation_steps (" +
                      std::to_string(*options.gradient_accumulation_steps) +
                      ") and gradient_accumulation_plugin were given. Pass only one: set num_steps in the plugin.");
  }
  if (options.gradient_accumulation_plugin) {
    settings.accumulation = *options.gradient_accumulation_plugin;
  } else {
    settings.accumulation.num_steps = options.gradient_accumulation_steps.value_or(
        environment.gradient_accumulation_steps.value_or(file.gradient_accumulation_steps.value_or(1)));
  }
  settings.accumulation.validate();

  settings.timeout =
      options.init_kwargs.timeout.value_or(environment.timeout.value_or(file.timeout.value_or(kDefaultTimeout)));
  if (settings.timeout.count() <= 0) {
    throw ConfigError("InitProcessGroupKwargs: timeout is " + std::to_string(settings.timeout.count()) +
                      " s; collectives need a positive deadline.");
  }
  settings.debug_mode = environment.debug_mode.value_or(file.debug_mode.value_or(false));
  settings.log_level = parse_log_level(environment.log_level.value_or(file.log_level.value_or("info")));
  settings.mpi_thread_level =
      parse_thread_level(environment.mpi_thread_level.value_or(file.mpi_thread_level.value_or("funneled")));
  settings.emulated_ranks_per_node =
      environment.emulated_ranks_per_node.value_or(file.emulated_ranks_per_node.value_or(0));
  settings.ignored_config_keys = file.unknown_keys;
  return settings;
}

}  // namespace accelerate
