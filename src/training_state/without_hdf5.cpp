// The training-state checkpoints in a build without HDF5
// (ACCELERATE_WITH_HDF5=OFF): each entry point throws FeatureNotBuilt naming
// itself and the Accelerator call that reached it, as the file API does
// (checkpoint/without_hdf5.cpp). Compiled instead of the HDF5 sources.
#include "accelerate/error.hpp"
#include "accelerate/training_state/async_state_saver.hpp"
#include "accelerate/training_state/training_checkpoint.hpp"

namespace accelerate::checkpoint {
namespace {

[[noreturn]] void not_built(std::string_view call) {
  accelerate::detail::throw_feature_not_built("parallel HDF5", call, "ACCELERATE_WITH_HDF5");
}

}  // namespace

std::filesystem::path save_training_state(const State&, ProjectConfiguration&,
                                          const std::optional<std::filesystem::path>&, const TrainingStateRefs&,
                                          CheckpointInfo) {
  not_built("save_training_state (Accelerator::save_state)");
}

std::optional<std::filesystem::path> find_latest_checkpoint(const State&, const ProjectConfiguration&) {
  not_built("find_latest_checkpoint (Accelerator::latest_checkpoint)");
}

LoadedTrainingState load_training_state(const State&, ProjectConfiguration&,
                                        const std::optional<std::filesystem::path>&, const TrainingStateRefs&, bool) {
  not_built("load_training_state (Accelerator::load_state)");
}

struct AsyncStateSaver::Impl {};

AsyncStateSaver::AsyncStateSaver() = default;
AsyncStateSaver::~AsyncStateSaver() = default;

std::filesystem::path AsyncStateSaver::save(const State&, ProjectConfiguration&,
                                            const std::optional<std::filesystem::path>&, const TrainingStateRefs&,
                                            CheckpointInfo) {
  not_built("AsyncStateSaver::save (Accelerator::save_state with async_save)");
}

std::optional<std::filesystem::path> AsyncStateSaver::wait() { return std::nullopt; }
bool AsyncStateSaver::pending() const noexcept { return false; }
bool AsyncStateSaver::writing() const noexcept { return false; }
std::uint64_t AsyncStateSaver::staging_bytes() const noexcept { return 0; }

}  // namespace accelerate::checkpoint
