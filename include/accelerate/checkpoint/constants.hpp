// Names shared by checkpoints and exported models (Accelerate's constants
// table), and the identity of the on-disk format. See docs/checkpoint-format.md.
#pragma once

#include <string_view>

namespace accelerate::checkpoint {

// Groups of a training-state checkpoint (Accelerator::save_state).
inline constexpr std::string_view MODEL_NAME = "pytorch_model";
inline constexpr std::string_view OPTIMIZER_NAME = "optimizer";
inline constexpr std::string_view RNG_STATE_NAME = "random_states";
inline constexpr std::string_view SCALER_NAME = "scaler";  // Accelerate writes "scaler.pt"
inline constexpr std::string_view SCHEDULER_NAME = "scheduler";

// Exported models (save_model).
inline constexpr std::string_view WEIGHTS_NAME = "pytorch_model.bin";
inline constexpr std::string_view SAFE_WEIGHTS_NAME = "model.safetensors";
inline constexpr std::string_view WEIGHTS_INDEX_NAME = "pytorch_model.bin.index.json";
inline constexpr std::string_view SAFE_WEIGHTS_INDEX_NAME = "model.safetensors.index.json";

// The HDF5 checkpoint format.
inline constexpr std::string_view FORMAT_NAME = "accelerate-hpc-checkpoint";
inline constexpr int FORMAT_VERSION = 1;
/// File in a checkpoint directory (one per directory; with save_on_each_node
/// each node's directory holds its own copy under the same name).
inline constexpr std::string_view STATE_FILE_NAME = "state.h5";
/// Written last, before the directory is renamed into place: its presence
/// with matching file sizes marks a complete checkpoint.
inline constexpr std::string_view MANIFEST_NAME = "manifest.json";

}  // namespace accelerate::checkpoint
