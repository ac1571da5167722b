// The steps of save_state, shared by the synchronous save
// (save_training_state) and the asynchronous one (AsyncStateSaver): plan the
// save on the main thread, write the state (to the file, or to a snapshot),
// then write the file and commit it, on the main thread or a thread of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>

#include "accelerate/checkpoint/checkpoint_writer.hpp"
#include "accelerate/runtime/comm_handle.hpp"
#include "accelerate/training_state/training_checkpoint.hpp"
#include "training_state/state_writer.hpp"

namespace accelerate::checkpoint::detail {

/// Where a save goes and what its file and manifest record: everything the
/// write and the commit need, so that they need not read the State or the
/// ProjectConfiguration (which the training goes on changing).
struct SavePlan {
  std::filesystem::path directory;
  CheckpointInfo info;
  int world_size = 1;
  int num_nodes = 1;
  int node_index = 0;
  bool save_on_each_node = false;
  bool overwrite = false;
  std::optional<int> total_limit;  // rotation after the commit
  /// Two tiers: the directory above is the node-local one, and after its
  /// commit the node files are copied to this one, in the shared tier.
  std::optional<std::filesystem::path> drain_to;
  std::chrono::milliseconds timeout{0};
};

/// save_state's checks and the directory's name; collective (the entry
/// barrier). `info.iteration` is set from the project.
SavePlan plan_save(const State& state, const ProjectConfiguration& project,
                   const std::optional<std::filesystem::path>& output_dir, const TrainingStateRefs& refs,
                   CheckpointInfo info);

/// Every object of `refs`, as the file's entries, in the one order.
void write_state(StateWriter& writer, const TrainingStateRefs& refs);

/// Stages the directory, writes the file through `write`, agrees on success
/// over `world` and commits (manifest, rename, rotation); with two tiers,
/// then copies the node files to the shared tier and commits them there. Collective over
/// `world` and `file_comm`; a failure anywhere throws on every rank and
/// leaves the previous checkpoints as they were.
void write_and_commit(const SavePlan& plan, CommHandle world, CommHandle file_comm,
                      const std::function<void(StateWriter&)>& write,
                      const std::function<void(std::uint64_t)>& on_progress);

}  // namespace accelerate::checkpoint::detail
