// ProjectConfiguration (Accelerate's dataclass of the same name) and the
// automatic checkpoint naming scheme <project_dir>/checkpoints/checkpoint_<i>.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "accelerate/runtime/progress.hpp"

namespace accelerate::checkpoint {

struct ProjectConfiguration {
  /// Directory for storing data; "" = not set (seeds: None).
  std::string project_dir;
  /// Directory for logs of locally-compatible loggers; "" = project_dir.
  std::string logging_dir;
  /// Name saves <project_dir>/checkpoints/checkpoint_<iteration>.
  bool automatic_checkpoint_naming = false;
  /// Keep at most this many complete checkpoints (nullopt: keep all).
  std::optional<int> total_limit;
  /// The current save iteration: the index of the next automatic checkpoint.
  /// Restored on load, so numbering continues after a restart.
  std::int64_t iteration = 0;
  /// Each node writes (and reads) its own copy, for node-local disks.
  bool save_on_each_node = false;
  /// save_state returns once the state is copied into host memory, and the
  /// file is written and committed on a thread of its own (ours; Accelerate
  /// has none). Needs MPI_THREAD_MULTIPLE, which the Accelerator then asks
  /// for when it starts MPI. docs/checkpointing.md, "Asynchronous saves".
  bool async_save = false;
  /// Two tiers of storage (ours): a node-local directory (a burst buffer,
  /// /tmp, $SLURM_TMPDIR) where each node writes its file of every
  /// checkpoint at local speed, under <local_dir>/checkpoints/, before the
  /// node files are copied to <project_dir>/checkpoints/. load_state takes
  /// the newest complete checkpoint of either tier. "" = one tier. Needs
  /// automatic_checkpoint_naming. docs/checkpointing.md, "Two tiers".
  std::string local_dir;

  /// Whether a checkpoint is one file per node (save_on_each_node, or two tiers).
  [[nodiscard]] bool files_per_node() const noexcept { return save_on_each_node || !local_dir.empty(); }
  /// How save_state/load_state show their progress in MiB of state (ours;
  /// Accelerate has none): on the main process, only for work that lasts
  /// past the delay, a bar on a terminal and a line every 10 s in a log.
  ProgressOptions progress{.delay = std::chrono::seconds(2), .line_interval = std::chrono::seconds(10)};

  /// Sets project_dir and, when it is unset, logging_dir (seeds: set_directories).
  void set_directories(const std::string& project_dir);
  /// Throws ConfigError for inconsistent values (naming without project_dir,
  /// total_limit < 1, iteration < 0).
  void validate() const;
};

/// <project_dir>/checkpoints
std::filesystem::path checkpoints_directory(const ProjectConfiguration& config);
/// <project_dir>/checkpoints/checkpoint_<iteration>
std::filesystem::path automatic_checkpoint_path(const ProjectConfiguration& config, std::int64_t iteration);
/// <local_dir>/checkpoints (two tiers).
std::filesystem::path local_checkpoints_directory(const ProjectConfiguration& config);

}  // namespace accelerate::checkpoint
