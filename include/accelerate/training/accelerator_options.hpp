// Configuration of an Accelerator (seeds: the Accelerator constructor, its
// kwargs handlers and plugins). Plain structs for designated initialisers:
//
//   accelerate::Accelerator accelerator({
//       .mixed_precision = "bf16",
//       .gradient_accumulation_steps = 4,
//       .project_config = {.project_dir = "run1", .automatic_checkpoint_naming = true, .total_limit = 2},
//   });
//
// Where a setting is left unset, the ACCELERATE_* environment variable
// decides, then the configuration file written by `accelerate-hpc config`,
// then the default (resolve_settings; docs/configuration.md).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/amp/autocast.hpp"
#include "accelerate/amp/grad_scaler.hpp"
#include "accelerate/data/data_loader_configuration.hpp"
#include "accelerate/profiling/profiler.hpp"
#include "accelerate/runtime/log_level.hpp"
#include "accelerate/runtime/mixed_precision.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/tracking/tracker.hpp"
#include "accelerate/training/distributed_data_parallel_kwargs.hpp"
#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"
#include "accelerate/training/gradient_state.hpp"
#include "accelerate/training_state/project_configuration.hpp"

namespace accelerate {

struct EnvConfig;
struct ConfigFile;

/// Seeds' InitProcessGroupKwargs. Processes and their ranks come from the
/// MPI launcher, so there is no rendezvous to configure.
struct InitProcessGroupKwargs {
  /// "mpi" or "nccl" (the backend of the device's tensors); unset: MPI for
  /// CPU tensors, NCCL for CUDA tensors. "nccl" on a CPU run or a build
  /// without NCCL is a ConfigError; "gloo" and others are refused.
  std::optional<std::string> backend;
  /// Unset or "env://" (the launcher's environment). Anything else is a
  /// ConfigError: MPI already connected the processes.
  std::optional<std::string> init_method;
  /// Deadline of every collective and barrier. Unset: ACCELERATE_TIMEOUT,
  /// the configuration file's timeout, else the seeds' default 1800 s.
  std::optional<std::chrono::seconds> timeout;
};

struct AcceleratorOptions {
  /// Run on the CPU even when GPUs are visible. Unset: ACCELERATE_USE_CPU,
  /// the config file's use_cpu, else false.
  std::optional<bool> cpu;
  /// "no", "fp16" or "bf16". Unset: ACCELERATE_MIXED_PRECISION, the config
  /// file, else "no". fp16 needs CUDA (ConfigError on the CPU: use bf16).
  std::optional<std::string> mixed_precision;
  /// Micro-batches per optimizer step. Setting both this and
  /// gradient_accumulation_plugin is a ConfigError (as in the seeds).
  /// Unset (with no plugin): ACCELERATE_GRADIENT_ACCUMULATION_STEPS, the
  /// config file, else 1.
  std::optional<int> gradient_accumulation_steps;
  std::optional<GradientAccumulationPlugin> gradient_accumulation_plugin;
  /// Step prepared schedulers only when the optimizer really stepped (after
  /// accumulation, not on a skipped fp16 step). false: every step() call
  /// steps the scheduler.
  bool step_scheduler_with_optimizer = true;
  /// Accelerate steps a prepared scheduler num_processes times per optimizer
  /// step unless split_batches, so that a schedule written in single-process
  /// steps ends on time. That surprises anyone who sized the schedule for
  /// the distributed run; here the default is one scheduler step per
  /// optimizer step, and true restores Accelerate's behaviour
  /// (docs/training.md, "Schedulers").
  bool step_scheduler_per_process = false;
  /// Generators synchronised at the start of every pass of each prepared
  /// loader ("torch", "cuda", "generator"); applied to loaders whose own
  /// DataLoaderOptions::rng_types is empty.
  std::vector<std::string> rng_types;
  DataLoaderConfiguration dataloader_config;
  checkpoint::ProjectConfiguration project_config;
  /// Move prepared models to the accelerator's device.
  bool device_placement = true;

  /// Sharded data parallelism (seeds: fsdp_plugin): with sharding_strategy
  /// "SHARD_GRAD_OP", prepared optimizers hold 1/N of the state and of the
  /// gradients (ZeRO stage 2; docs/sharding.md). Unset: plain DDP.
  std::optional<FullyShardedDataParallelPlugin> fsdp_plugin;

  // Kwargs handlers (seeds: kwargs_handlers=[...]).
  DistributedDataParallelKwargs ddp_kwargs;
  GradScalerKwargs scaler_kwargs;
  InitProcessGroupKwargs init_kwargs;
  AutocastKwargs autocast_kwargs;
  /// What profile() records and where it writes (docs/profiling.md).
  ProfileKwargs profile_kwargs;

  /// The configuration file to read; unset: default_config_file() when it
  /// exists. An explicit path that does not exist is a ConfigError.
  std::optional<std::filesystem::path> config_file;
  /// Bind each rank to its NUMA domain at construction. Unset:
  /// ACCELERATE_CPU_AFFINITY, the config file, else false.
  std::optional<bool> numa_affinity;
  /// Experiment trackers (seeds: log_with): built-in ones by type or name
  /// ("all", "csv", "jsonl", "tensorboard") and trackers of your own. They start with
  /// init_trackers(); files go to project_config's logging directory.
  std::vector<tracking::TrackerChoice> log_with;
};

/// The settings an Accelerator runs with, after the precedence
/// explicit option > environment > configuration file > default.
struct ResolvedSettings {
  bool cpu = false;
  MixedPrecision mixed_precision = MixedPrecision::No;
  GradientAccumulationPlugin accumulation;
  bool numa_affinity = false;
  std::chrono::seconds timeout{1800};
  /// ACCELERATE_DEBUG_MODE / the file's debug: cross-rank checks before collectives.
  bool debug_mode = false;
  /// Settings only the environment and the file give (no Accelerator option):
  /// passed to the State explicitly, so that the file is honoured too.
  LogLevel log_level = LogLevel::Info;
  ThreadLevel mpi_thread_level = ThreadLevel::Funneled;
  int emulated_ranks_per_node = 0;
  /// Keys of the configuration file this library does not know (warned about).
  std::vector<std::string> ignored_config_keys;
};

/// Applies the precedence rule. Pure: the environment and the file come in
/// as arguments. Throws ConfigError for conflicting or invalid values.
ResolvedSettings resolve_settings(const AcceleratorOptions& options, const EnvConfig& environment,
                                  const ConfigFile* config_file);

}  // namespace accelerate
