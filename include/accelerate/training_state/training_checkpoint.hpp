// Saving and loading a whole training state (what Accelerator::save_state and
// load_state do): models, optimizers, schedulers, the GradScaler, data loader
// positions, every rank's RNG states and registered objects, in one parallel
// HDF5 file per checkpoint directory (docs/checkpoint-format.md), committed
// atomically (checkpoint_directory.hpp).
//
// Collective over the State's world. The references are not owned; every
// rank passes the same kinds and numbers of objects in the same order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/checkpoint/checkpoint_writer.hpp"
#include "accelerate/checkpoint/shard_layout.hpp"
#include "accelerate/training_state/project_configuration.hpp"

namespace at {
class Tensor;
}
namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace accelerate {
class State;
class GradScaler;
}  // namespace accelerate

namespace accelerate::checkpoint {

/// Small integer state stored as attributes of a group (loader positions,
/// scheduler step counts, the accelerator's counters).
struct CounterState {
  std::function<std::map<std::string, std::int64_t>()> save;
  std::function<void(const std::map<std::string, std::int64_t>&)> load;
};

/// An object registered for checkpointing: named tensors out and in.
struct TensorState {
  std::function<std::map<std::string, at::Tensor>()> save;
  std::function<void(const std::map<std::string, at::Tensor>&)> load;
  /// false: the tensors are the same on every rank (written once, in shares).
  /// true: every rank has its own values (e.g. its part of a domain), stored
  /// as rows [world_size, …]; such objects load only on the same number of
  /// ranks (ConfigError otherwise), each rank its own row.
  bool per_rank = false;
  /// Written as string attributes of the object's group, for readers of the
  /// file (e.g. the layout and memory space a Kokkos view was saved from).
  std::map<std::string, std::string> attributes;
};

/// What one checkpoint holds. Group names follow Accelerate's constants
/// (pytorch_model, optimizer, scheduler, scaler, random_states); the second
/// and later objects of a kind get a suffix (pytorch_model_1, …).
struct TrainingStateRefs {
  std::vector<torch::nn::Module*> models;
  /// Per model (empty: none): the parameters its ranks hold in pieces
  /// (FULL_SHARD), written and read in those pieces; nullopt for a model every
  /// rank holds whole.
  std::vector<std::optional<ShardedWeights>> model_shards;
  std::vector<torch::optim::Optimizer*> optimizers;
  /// Per optimizer (empty: none): how a ShardedOptimizer's shards map to the
  /// model's parameters, or nullopt for an optimizer of whole parameters.
  /// Sharded state is saved as whole per-parameter tensors all the same, so a
  /// checkpoint loads with any sharding on any number of ranks.
  std::vector<std::optional<ShardLayout>> optimizer_shards;
  std::vector<CounterState> schedulers;
  GradScaler* scaler = nullptr;  // saved when enabled
  std::vector<CounterState> dataloaders;
  std::vector<TensorState> custom_objects;
  /// Extra counters of the training loop (group "accelerator").
  std::optional<CounterState> loop_counters;
};

/// `base` for index 0, `base_<i>` after (Accelerate's naming of several models/optimizers).
std::string indexed_group(std::string_view base, std::size_t index);

/// Writes a checkpoint and commits it. The directory is `output_dir`, or
/// with project.automatic_checkpoint_naming (then output_dir must be unset)
/// <project_dir>/checkpoints/checkpoint_<project.iteration>; after the
/// commit, project.iteration is incremented and, with automatic naming and
/// a total_limit, older checkpoints are rotated. `info.iteration` is set
/// here. Returns the committed directory.
std::filesystem::path save_training_state(const State& state, ProjectConfiguration& project,
                                          const std::optional<std::filesystem::path>& output_dir,
                                          const TrainingStateRefs& refs, CheckpointInfo info);

struct LoadedTrainingState {
  std::filesystem::path directory;
  std::int64_t step = 0;
  std::int64_t iteration = 0;
  std::int64_t saved_world_size = 0;
  std::string mixed_precision;
  /// Non-strict loads: what did not match, per group (empty when all matched).
  std::map<std::string, std::string> key_problems;
};

/// The newest complete checkpoint under the project's checkpoints directory,
/// the same on every rank (rank 0 of each file group looks, the answer is
/// agreed); nullopt when there is none. Collective.
std::optional<std::filesystem::path> find_latest_checkpoint(const State& state, const ProjectConfiguration& project);

/// Loads a checkpoint written by save_training_state, on any number of
/// ranks. `input_dir` unset: the newest complete checkpoint of the project
/// (ConfigError when there is none). strict: missing, unexpected or
/// mis-shaped model entries throw ConfigError listing all of them before
/// anything is loaded. Sets project.iteration to the checkpoint's + 1.
/// Errors (corrupt data, RNG states that cannot be restored) throw on every rank.
LoadedTrainingState load_training_state(const State& state, ProjectConfiguration& project,
                                        const std::optional<std::filesystem::path>& input_dir,
                                        const TrainingStateRefs& refs, bool strict = true);

}  // namespace accelerate::checkpoint
