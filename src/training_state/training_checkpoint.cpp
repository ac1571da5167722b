#include "accelerate/training_state/training_checkpoint.hpp"

#include <mpi.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <exception>
#include <functional>
#include <iostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "accelerate/amp/grad_scaler.hpp"
#include "accelerate/checkpoint/checkpoint_directory.hpp"
#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/error.hpp"
#include "accelerate/random/rng_state.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/progress.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/training_state/module_state.hpp"
#include "checkpoint/hdf5_types.hpp"
#include "checkpoint/tensor_pieces.hpp"
#include "detail/deadline_comm.hpp"
#include "detail/profile_range.hpp"
#include "training_state/optimizer_state.hpp"
#include "training_state/state_save.hpp"

namespace accelerate::checkpoint {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kDataLoaderGroup = "dataloader";
constexpr std::string_view kCustomGroup = "custom_checkpoint";
constexpr std::string_view kLoopGroup = "accelerator";

// The ranks that write (and read) one file together.
constexpr std::string_view kSaveStateIsCollective =
    "save_state, which every process must call (not only the main process: it writes in parallel),";
constexpr std::string_view kLoadStateIsCollective = "load_state, which every process must call,";

accelerate::detail::DeadlineComm file_comm(const State& state, const ProjectConfiguration& project) {
  return {project.files_per_node() ? state.node_comm() : state.world_comm(), state.timeout()};
}

accelerate::detail::DeadlineComm world_comm(const State& state) { return {state.world_comm(), state.timeout()}; }

// The progress of a save or load on the main process, in MiB. The writer and
// reader report every tensor they move; the total counts the large parts
// (models and optimizers on save, the file's entries on load), so the count
// is held at the total for the last small ones.
class StateProgress {
 public:
  StateProgress(const State& state, const ProjectConfiguration& project, std::string label, std::uint64_t total_bytes)
      : progress_(std::move(label), mebibytes(total_bytes), shown_on_main(state, project.progress)),
        total_bytes_(total_bytes) {}

  [[nodiscard]] std::function<void(std::uint64_t)> reporter() {
    return [this](std::uint64_t bytes) { add(bytes); };
  }
  /// `bytes` more of the state moved.
  void add(std::uint64_t bytes) {
    bytes_ = std::min(bytes_ + bytes, total_bytes_);
    const std::int64_t done = mebibytes(bytes_);
    if (done > progress_.done()) progress_.advance(done - progress_.done());
  }
  void finish() { progress_.finish(); }

 private:
  static constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
  static std::int64_t mebibytes(std::uint64_t bytes) { return static_cast<std::int64_t>((bytes + kMiB - 1) / kMiB); }
  static ProgressOptions shown_on_main(const State& state, ProgressOptions options) {
    options.shown = options.shown && state.is_main_process();
    return options;
  }

  Progress progress_;
  std::uint64_t total_bytes_;
  std::uint64_t bytes_ = 0;
};

// A ShardedOptimizer's layout, or nullptr for whole state.
const ShardLayout* shards_of(const TrainingStateRefs& refs, std::size_t optimizer) {
  return optimizer < refs.optimizer_shards.size() && refs.optimizer_shards[optimizer]
             ? &*refs.optimizer_shards[optimizer]
             : nullptr;
}

const ShardedWeights* weights_of(const TrainingStateRefs& refs, std::size_t model) {
  return model < refs.model_shards.size() && refs.model_shards[model] ? &*refs.model_shards[model] : nullptr;
}

std::map<std::string, const ShardedWeights::Weight*> weights_by_name(const ShardedWeights& weights) {
  std::map<std::string, const ShardedWeights::Weight*> by_name;
  for (const auto& weight : weights.weights) by_name.emplace(weight.name, &weight);
  return by_name;
}

int weights_copy(const ShardedWeights& weights, int file_ranks, const std::string& group) {
  return detail::copy_in_file(weights.world_size, weights.replicas, weights.replica, file_ranks, "the model's weights",
                              "checkpoint: group '" + group + "'");
}

// The names under which a tensor met before is registered again (tied
// weights), walking the module as LibTorch's named_parameters() and
// named_buffers() do: a whole model's checkpoint holds each tensor once, under
// the name met first, as save_model's files do.
std::set<std::string> repeated_names(const torch::nn::Module& model) {
  std::set<const c10::TensorImpl*> seen;
  std::set<std::string> repeated;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) repeated.insert(item.key());
  }
  for (const auto& item : model.named_buffers(/*recurse=*/true)) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) repeated.insert(item.key());
  }
  return repeated;
}

// A model's tensors: whole, or (FULL_SHARD) its sharded parameters in this
// rank's pieces, into the same whole datasets; of pieces held in several
// copies, the first copy's ranks write.
void write_model(detail::StateWriter& writer, const std::string& group, const torch::nn::Module& model,
                 const ShardedWeights* weights) {
  const auto pieced = weights != nullptr ? weights_by_name(*weights) : decltype(weights_by_name(*weights)){};
  const bool writes_pieces = weights == nullptr || weights_copy(*weights, writer.size(), group) == 0;
  const std::set<std::string> repeated = weights == nullptr ? repeated_names(model) : std::set<std::string>{};
  for (const auto& [name, tensor] : module_state(model)) {
    if (repeated.count(name) != 0) continue;  // a tied weight, written under its first name
    const auto it = pieced.find(name);
    if (it == pieced.end()) {
      writer.write_replicated(group + "/" + name, tensor);
    } else {
      const ShardedWeights::Weight& weight = *it->second;
      writer.write_pieces(group + "/" + name, weight.dtype, weight.shape,
                          writes_pieces ? weight.pieces : std::vector<TensorPiece>{});
    }
  }
}

// The reverse: whole tensors read whole, sharded parameters read straight
// into this rank's pieces of them. The names are checked, all together,
// before anything is read.
KeyReport read_model(CheckpointReader& reader, const std::string& group, const torch::nn::Module& model,
                     const ShardedWeights* weights, bool strict) {
  std::map<std::string, at::Tensor> state = module_state(model);
  if (weights == nullptr) {
    // A tied weight is read under its first name. Checkpoints written before
    // ties were stored once hold its other names too: those the file has are
    // read as well (the same tensor, the same values), so that none of them
    // is unexpected; those it lacks are not missing.
    const std::set<std::string> repeated = repeated_names(model);
    if (!repeated.empty()) {
      std::vector<TensorSpec> others;
      for (const std::string& name : repeated) {
        const at::Tensor& tensor = state.at(name);
        others.push_back({name, std::string(detail::dtype_name(tensor.scalar_type())), tensor.sizes().vec()});
      }
      const KeyReport present = reader.check_keys(group, others, /*strict=*/false);
      for (const std::string& name : present.missing) state.erase(name);
    }
    return reader.load_into(group, state, strict);
  }
  const int copy = weights_copy(*weights, reader.size(), group);  // refused before anything is read
  const auto pieced = weights_by_name(*weights);
  std::vector<TensorSpec> expected;
  for (const auto& [name, tensor] : state) {
    const auto it = pieced.find(name);
    if (it == pieced.end()) {
      expected.push_back({name, std::string(detail::dtype_name(tensor.scalar_type())), tensor.sizes().vec()});
    } else {
      expected.push_back({name, std::string(detail::dtype_name(it->second->dtype)), it->second->shape});
    }
  }
  const KeyReport report = reader.check_keys(group, expected, strict);
  std::set<std::string> skip(report.missing.begin(), report.missing.end());
  for (const KeyMismatch& mismatch : report.mismatched) skip.insert(mismatch.name);
  std::map<std::string, at::Tensor> whole;
  for (const auto& [name, tensor] : state) {
    if (pieced.count(name) == 0 && skip.count(name) == 0) whole.emplace(name, tensor);
  }
  (void)reader.load_into(group, whole, /*strict=*/false);
  for (const ShardedWeights::Weight& weight : weights->weights) {
    if (skip.count(weight.name) == 0) reader.read_pieces(group + "/" + weight.name, weight.pieces, copy);
  }
  return report;
}

std::uint64_t large_state_bytes(const TrainingStateRefs& refs) {
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < refs.models.size(); ++i) {
    const torch::nn::Module& model = *refs.models[i];
    const std::set<std::string> repeated =
        weights_of(refs, i) == nullptr ? repeated_names(model) : std::set<std::string>{};
    for (const auto& [name, tensor] : module_state(model)) {
      if (repeated.count(name) == 0) bytes += static_cast<std::uint64_t>(tensor.nbytes());
    }
  }
  for (std::size_t i = 0; i < refs.optimizers.size(); ++i)
    bytes += detail::optimizer_state_bytes(*refs.optimizers[i], shards_of(refs, i));
  return bytes;
}

// What a load reads at most: every replicated entry, one row of the others.
std::uint64_t entry_bytes(const CheckpointReader& reader) {
  std::uint64_t bytes = 0;
  for (const EntryInfo& entry : reader.entries("")) {
    std::uint64_t elements = 1;
    for (const std::int64_t extent : entry.spec.shape) elements *= static_cast<std::uint64_t>(extent);
    bytes += elements * c10::elementSize(detail::dtype_from_name(entry.spec.dtype, entry.spec.name));
  }
  return bytes;
}

void write_counters(detail::StateWriter& writer, const std::string& group, const CounterState& counters) {
  writer.set_attribute(group, "kind", std::string("counters"));
  for (const auto& [name, value] : counters.save()) writer.set_attribute(group, name, value);
}

void read_counters(CheckpointReader& reader, const std::string& group, const CounterState& counters) {
  std::map<std::string, std::int64_t> values;
  for (const auto& [name, unused] : counters.save()) {
    const auto value = reader.attribute(group, name);
    if (!value || !std::holds_alternative<std::int64_t>(*value)) {
      throw ConfigError("checkpoint '" + reader.file().string() + "': group '" + group + "' lacks the integer '" +
                        name + "'. Prepare the same objects, in the same order, as the run that saved it.");
    }
    values[name] = std::get<std::int64_t>(*value);
  }
  counters.load(values);
}

void write_rng_states(detail::StateWriter& writer) {
  const RngStates states = capture_rng_states();
  const std::string group(RNG_STATE_NAME);
  writer.write_per_rank(group + "/torch", states.torch);
  writer.set_attribute(group, "cuda_devices", static_cast<std::int64_t>(states.cuda.size()));
  for (std::size_t d = 0; d < states.cuda.size(); ++d) {
    writer.write_per_rank(group + "/cuda_" + std::to_string(d), states.cuda[d]);
  }
}

void read_rng_states(CheckpointReader& reader) {
  const std::string group(RNG_STATE_NAME);
  RngStates states;
  states.torch = reader.read_per_rank(group + "/torch");
  const auto devices = reader.attribute(group, "cuda_devices");
  const std::int64_t count = devices ? std::get<std::int64_t>(*devices) : 0;
  for (std::int64_t d = 0; d < count; ++d)
    states.cuda.push_back(reader.read_per_rank(group + "/cuda_" + std::to_string(d)));
  try {
    restore_rng_states(states);
  } catch (const std::exception& error) {
    throw ConfigError("checkpoint '" + reader.file().string() +
                      "': the random states cannot be restored: " + error.what());
  }
}

}  // namespace

namespace detail {

void write_state(StateWriter& writer, const TrainingStateRefs& refs) {
  for (std::size_t i = 0; i < refs.models.size(); ++i) {
    write_model(writer, indexed_group(MODEL_NAME, i), *refs.models[i], weights_of(refs, i));
  }
  for (std::size_t i = 0; i < refs.optimizers.size(); ++i) {
    write_optimizer(writer, indexed_group(OPTIMIZER_NAME, i), *refs.optimizers[i], shards_of(refs, i));
  }
  for (std::size_t i = 0; i < refs.schedulers.size(); ++i) {
    write_counters(writer, indexed_group(SCHEDULER_NAME, i), refs.schedulers[i]);
  }
  if (refs.scaler != nullptr && refs.scaler->is_enabled()) {
    for (const auto& [name, tensor] : refs.scaler->state().to_tensors()) {
      writer.write_replicated(std::string(SCALER_NAME) + "/" + name, tensor);
    }
  }
  for (std::size_t i = 0; i < refs.dataloaders.size(); ++i) {
    write_counters(writer, indexed_group(kDataLoaderGroup, i), refs.dataloaders[i]);
  }
  for (std::size_t i = 0; i < refs.custom_objects.size(); ++i) {
    const std::string group = std::string(kCustomGroup) + "_" + std::to_string(i);
    writer.set_attribute(group, "kind", std::string("custom"));
    for (const auto& [name, value] : refs.custom_objects[i].attributes) writer.set_attribute(group, name, value);
    for (const auto& [name, tensor] : refs.custom_objects[i].save()) {
      if (refs.custom_objects[i].per_rank) {
        writer.write_per_rank(group + "/" + name, tensor);
      } else {
        writer.write_replicated(group + "/" + name, tensor);
      }
    }
  }
  if (refs.loop_counters) write_counters(writer, std::string(kLoopGroup), *refs.loop_counters);
  write_rng_states(writer);
}

}  // namespace detail

namespace {

std::map<std::string, at::Tensor> read_group(CheckpointReader& reader, const std::string& group) {
  std::map<std::string, at::Tensor> tensors;
  std::vector<std::string> replicated;
  for (const EntryInfo& entry : reader.entries(group)) {
    if (entry.kind == EntryKind::PerRank) {
      tensors[entry.spec.name.substr(group.size() + 1)] = reader.read_per_rank(entry.spec.name);
    } else {
      replicated.push_back(entry.spec.name);
    }
  }
  std::vector<at::Tensor> read = reader.read_replicated(replicated);  // one batch
  for (std::size_t k = 0; k < read.size(); ++k) tensors[replicated[k].substr(group.size() + 1)] = std::move(read[k]);
  return tensors;
}

void read_state(CheckpointReader& reader, const TrainingStateRefs& refs, bool strict, int ranks,
                LoadedTrainingState& loaded) {
  torch::NoGradGuard no_grad;  // parameters are written in place
  for (std::size_t i = 0; i < refs.models.size(); ++i) {
    const std::string group = indexed_group(MODEL_NAME, i);
    const KeyReport report = read_model(reader, group, *refs.models[i], weights_of(refs, i), strict);
    if (!report.empty()) loaded.key_problems[group] = report.to_string();
  }
  // Schedulers before optimizers: replaying a schedule moves the learning
  // rates, and the optimizers' saved hyper-parameters then overwrite them.
  for (std::size_t i = 0; i < refs.schedulers.size(); ++i) {
    read_counters(reader, indexed_group(SCHEDULER_NAME, i), refs.schedulers[i]);
  }
  for (std::size_t i = 0; i < refs.optimizers.size(); ++i) {
    detail::read_optimizer(reader, indexed_group(OPTIMIZER_NAME, i), *refs.optimizers[i], shards_of(refs, i));
  }
  if (refs.scaler != nullptr && refs.scaler->is_enabled()) {
    const std::string group(SCALER_NAME);
    if (reader.entries(group).empty()) {
      throw ConfigError("checkpoint '" + reader.file().string() +
                        "' has no GradScaler state (it was saved without fp16), but this run scales the loss.");
    }
    refs.scaler->load_state(GradScalerState::from_tensors(read_group(reader, group)));
  }
  for (std::size_t i = 0; i < refs.dataloaders.size(); ++i) {
    read_counters(reader, indexed_group(kDataLoaderGroup, i), refs.dataloaders[i]);
  }
  for (std::size_t i = 0; i < refs.custom_objects.size(); ++i) {
    const std::string group = std::string(kCustomGroup) + "_" + std::to_string(i);
    if (refs.custom_objects[i].per_rank && reader.header().world_size != ranks) {
      throw ConfigError("checkpoint '" + reader.file().string() + "': registered object " + std::to_string(i) +
                        " holds one row per rank of the " + std::to_string(reader.header().world_size) +
                        " ranks that saved it, but " + std::to_string(ranks) +
                        " ranks load it. Resume on the same number of ranks (or register it as replicated state).");
    }
    refs.custom_objects[i].load(read_group(reader, group));
  }
  if (refs.loop_counters) read_counters(reader, std::string(kLoopGroup), *refs.loop_counters);
  read_rng_states(reader);
}

}  // namespace

namespace detail {

SavePlan plan_save(const State& state, const ProjectConfiguration& project, const std::optional<fs::path>& output_dir,
                   const TrainingStateRefs& refs, CheckpointInfo info) {
  // Entry barrier with the job's timeout: calling save_state on the main
  // process only is a common mistake, and must not hang in MPI-IO.
  state.wait_for_everyone(kSaveStateIsCollective);
  project.validate();
  SavePlan plan;
  if (project.automatic_checkpoint_naming) {
    if (output_dir) {
      throw ConfigError("save_state: a directory ('" + output_dir->string() +
                        "') was given, but ProjectConfiguration::automatic_checkpoint_naming names the checkpoint "
                        "itself. Call save_state() without a directory, or turn automatic naming off.");
    }
    plan.directory = automatic_checkpoint_path(project, project.iteration);
    if (!project.local_dir.empty()) {
      plan.drain_to = plan.directory;
      plan.directory = local_checkpoints_directory(project) / plan.directory.filename();
    }
  } else if (output_dir) {
    plan.directory = *output_dir;
  } else {
    throw ConfigError(
        "save_state: no directory given. Pass one, or set ProjectConfiguration::project_dir with "
        "automatic_checkpoint_naming = true.");
  }
  for (std::size_t i = 0; i < refs.optimizers.size(); ++i) {
    check_optimizer_supported(*refs.optimizers[i], indexed_group(OPTIMIZER_NAME, i));
  }
  info.iteration = project.iteration;
  plan.info = std::move(info);
  plan.world_size = state.num_processes();
  plan.num_nodes = state.num_nodes();
  plan.node_index = state.node_index();
  plan.save_on_each_node = project.files_per_node();
  plan.overwrite = !project.automatic_checkpoint_naming;
  plan.total_limit = project.automatic_checkpoint_naming ? project.total_limit : std::nullopt;
  plan.timeout = state.timeout();
  return plan;
}

namespace {

// The second tier: each node's leader copies the node file the local commit
// left into a staged directory of the shared tier, and the world commits it
// as a save_on_each_node checkpoint (the node files side by side).
void drain_to_shared_tier(const SavePlan& plan, CommHandle world, CommHandle file_comm, const Manifest& manifest) {
  ACCELERATE_PROFILE_RANGE("accelerate::save_state_drain");
  StagedCheckpoint staged(*plan.drain_to, {.world = world,
                                           .file_comm = file_comm,
                                           .save_on_each_node = true,
                                           .node_index = plan.node_index,
                                           .num_nodes = plan.num_nodes,
                                           .overwrite = false,
                                           .timeout = plan.timeout});
  const accelerate::detail::DeadlineComm node(file_comm.get(), plan.timeout);
  bool copied = true;
  if (node.rank() == 0) {
    std::error_code error;
    fs::copy_file(plan.directory / state_file_name(true, plan.node_index), staged.file_path(), error);
    if (error) {
      std::cerr << accelerate::detail::where() << " save_state: copying node " << plan.node_index << "'s file of "
                << plan.directory.string() << " to the shared tier failed: " << error.message() << std::endl;
      copied = false;
    }
  }
  node.barrier("save_state (each node's file copied to the shared tier)");
  staged.commit(copied, manifest, plan.total_limit);
}

}  // namespace

void write_and_commit(const SavePlan& plan, CommHandle world, CommHandle file_comm,
                      const std::function<void(StateWriter&)>& write,
                      const std::function<void(std::uint64_t)>& on_progress) {
  StagedCheckpoint staged(plan.directory, {.world = world,
                                           .file_comm = file_comm,
                                           .save_on_each_node = plan.save_on_each_node,
                                           .node_index = plan.node_index,
                                           .num_nodes = plan.num_nodes,
                                           .overwrite = plan.overwrite,
                                           .timeout = plan.timeout});
  std::exception_ptr failure;
  try {
    CheckpointWriter writer({.comm = file_comm,
                             .file = staged.file_path(),
                             .num_nodes = plan.num_nodes,
                             .node_index = plan.save_on_each_node ? plan.node_index : 0,
                             .timeout = plan.timeout,
                             .on_progress = on_progress},
                            plan.info);
    FileStateWriter into(writer);
    write(into);
    writer.close();
  } catch (...) {
    failure = std::current_exception();
  }
  Manifest manifest;
  manifest.step = plan.info.step;
  manifest.iteration = plan.info.iteration;
  manifest.world_size = plan.world_size;
  if (failure) {
    try {
      staged.commit(false, manifest, plan.total_limit);
    } catch (...) {  // every rank throws there; this rank's own error says more
    }
    std::rethrow_exception(failure);
  }
  staged.commit(true, manifest, plan.total_limit);
  if (plan.drain_to) drain_to_shared_tier(plan, world, file_comm, manifest);
}

}  // namespace detail

fs::path save_training_state(const State& state, ProjectConfiguration& project,
                             const std::optional<fs::path>& output_dir, const TrainingStateRefs& refs,
                             CheckpointInfo info) {
  const detail::SavePlan plan = detail::plan_save(state, project, output_dir, refs, std::move(info));
  StateProgress progress(state, project, "save_state '" + plan.directory.string() + "' (MiB)", large_state_bytes(refs));
  detail::write_and_commit(
      plan, state.world_comm(), file_comm(state, project).get(),
      [&refs](detail::StateWriter& writer) { detail::write_state(writer, refs); }, progress.reporter());
  progress.finish();
  project.iteration += 1;
  return plan.drain_to.value_or(plan.directory);
}

namespace {

// The newest complete checkpoint under `directory` as each file group's rank 0
// sees it, agreed over the world: its index, or -1 when the nodes' answers
// differ (`differ` set) or there is none.
std::int64_t newest_agreed(const State& state, const ProjectConfiguration& project, const fs::path& directory,
                           bool& differ) {
  const auto comm = file_comm(state, project);
  std::string found;
  if (comm.rank() == 0) {
    if (const auto latest = latest_checkpoint(directory)) found = latest->string();
  }
  comm.broadcast(found, 0, "load_state (broadcast of the newest checkpoint's name)");
  const auto index = found.empty() ? std::optional<std::int64_t>() : checkpoint_index(found);
  long long agreed[2] = {index.value_or(-1), -index.value_or(-1)};
  world_comm(state).all_reduce(agreed, 2, accelerate::detail::Reduce::Max,
                               "load_state (do all nodes hold the same newest checkpoint?)");
  differ = agreed[0] != -agreed[1];
  return differ ? -1 : agreed[0];
}

}  // namespace

std::optional<fs::path> find_latest_checkpoint(const State& state, const ProjectConfiguration& project) {
  if (project.project_dir.empty()) return std::nullopt;
  bool differ = false;
  if (!project.local_dir.empty()) {
    // Two tiers: the newest complete checkpoint of either, the local one when
    // both hold it. Nodes whose local tiers differ (a job requeued on other
    // nodes) resume from the shared tier.
    const std::int64_t local = newest_agreed(state, project, local_checkpoints_directory(project), differ);
    std::string shared;
    const auto world = world_comm(state);
    if (world.rank() == 0) {
      if (const auto latest = latest_checkpoint(checkpoints_directory(project))) shared = latest->string();
    }
    world.broadcast(shared, 0, "load_state (broadcast of the shared tier's newest checkpoint)");
    const std::int64_t in_shared = shared.empty() ? -1 : checkpoint_index(shared).value_or(-1);
    if (local >= 0 && local >= in_shared)
      return local_checkpoints_directory(project) / ("checkpoint_" + std::to_string(local));
    if (in_shared >= 0) return fs::path(shared);
    return std::nullopt;
  }
  const std::int64_t newest = newest_agreed(state, project, checkpoints_directory(project), differ);
  if (differ) {
    // With node-local copies every node looked at its own disk: they must agree.
    throw ConfigError("load_state: the nodes do not hold the same newest checkpoint under '" +
                      checkpoints_directory(project).string() +
                      "'. With save_on_each_node every node needs its copy; remove the incomplete ones or pass the "
                      "directory explicitly.");
  }
  if (newest < 0) return std::nullopt;
  return automatic_checkpoint_path(project, newest);
}

LoadedTrainingState load_training_state(const State& state, ProjectConfiguration& project,
                                        const std::optional<fs::path>& input_dir, const TrainingStateRefs& refs,
                                        bool strict) {
  state.wait_for_everyone(kLoadStateIsCollective);
  LoadedTrainingState loaded;
  if (input_dir) {
    loaded.directory = *input_dir;
  } else {
    const auto latest = find_latest_checkpoint(state, project);
    if (!latest) {
      throw ConfigError(
          "load_state: no directory given and no complete checkpoint under '" +
          (project.project_dir.empty() ? std::string("(project_dir unset)") : checkpoints_directory(project).string()) +
          "'. Pass a checkpoint directory, or save one first.");
    }
    loaded.directory = *latest;
  }
  const fs::path file = loaded.directory / state_file_name(project.files_per_node(), state.node_index());
  // A directory without a valid manifest is not a checkpoint (an interrupted save, or a typo).
  // One reader per file group looks, not every rank (metadata load on a parallel file system).
  if (file_comm(state, project).rank() == 0) {
    if (const auto recovered = recover_interrupted_commit(loaded.directory)) {
      std::cerr << accelerate::detail::where() << " load_state: " << *recovered << "\n";
    }
  }
  const int complete =
      file_comm(state, project).rank() != 0 || read_complete_manifest(loaded.directory).has_value() ? 1 : 0;
  const int all_complete = world_comm(state).all_reduce(complete, accelerate::detail::Reduce::Min,
                                                        "load_state (is the checkpoint complete on every rank?)");
  if (all_complete == 0) {
    throw ConfigError("load_state: '" + loaded.directory.string() +
                      "' is not a complete checkpoint on every rank (no manifest.json, or a file listed in it is "
                      "missing or truncated). Pass a checkpoint directory written by save_state.");
  }
  // The total comes from the file's index, which the reader opens first.
  std::optional<StateProgress> progress;
  CheckpointReader reader({.comm = file_comm(state, project).get(),
                           .file = file,
                           .timeout = state.timeout(),
                           .on_progress = [&progress](std::uint64_t bytes) {
                             if (progress) progress->add(bytes);
                           }});
  progress.emplace(state, project, "load_state '" + loaded.directory.string() + "' (MiB)", entry_bytes(reader));
  read_state(reader, refs, strict, file_comm(state, project).size(), loaded);
  progress->finish();
  const CheckpointHeader& header = reader.header();
  loaded.step = header.step;
  loaded.iteration = header.iteration;
  loaded.saved_world_size = header.world_size;
  loaded.mixed_precision = header.mixed_precision;
  project.iteration = header.iteration + 1;
  return loaded;
}

}  // namespace accelerate::checkpoint
