// Loading a checkpoint into a model with Accelerate's load_checkpoint_in_model
// options: a dtype to load in (a bf16 file into an fp32 model, or an fp32
// file into a bf16 model, in one call), a device map that places each tensor
// as it is read, an offload folder for the tensors the map sends to the disk,
// and strict key checking.
//
//   accelerate::LoadCheckpointOptions options;
//   options.device_map = accelerate::infer_auto_device_map(*model, budget);
//   options.offload_folder = "offload";
//   auto report = accelerate::load_checkpoint_in_model(*model, "exported/", options);
#pragma once

#include <c10/core/ScalarType.h>

#include <filesystem>
#include <optional>

#include "accelerate/checkpoint/key_report.hpp"
#include "accelerate/modeling/device_map.hpp"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace accelerate {

struct LoadCheckpointOptions {
  /// Where each tensor goes ("0", "cpu", "disk"); without one, each tensor
  /// stays on the device it is on, except that one on the meta device (a model
  /// built by init_empty_weights) comes to the CPU.
  std::optional<DeviceMap> device_map;
  /// Where the tensors mapped to "disk" are written (Accelerate's offload
  /// folder format, offload.hpp); required when the map names the disk.
  std::optional<std::filesystem::path> offload_folder;
  /// The dtype floating-point tensors are loaded in; the model's tensors take
  /// it. Without one, each tensor keeps the model's dtype.
  std::optional<c10::ScalarType> dtype;
  /// Missing or unexpected names are a ConfigError (after the matching
  /// tensors were loaded, as PyTorch's load_state_dict does).
  bool strict = false;
};

/// Loads `checkpoint` (a .safetensors file, an index .json, a folder holding
/// either, or one of this library's HDF5 checkpoints) into `model`'s
/// parameters and buffers, tensor by tensor, in place
/// (set_module_tensor_to_device()): member fields and tied weights follow.
/// Tensors mapped to the disk are written to the offload folder, in the dtype
/// the model's tensor takes, and merged into its index.json; the model's
/// tensor then maps that file (map_offloaded_weight()): its values are the
/// checkpoint's, its memory the file's pages rather than the process's.
/// (Accelerate leaves such tensors on the meta device and reads them back in a
/// forward hook; LibTorch modules have no such hooks, so a mapped tensor keeps
/// the model runnable.)
/// A tensor of another shape is a ConfigError. Returns the missing and
/// unexpected names.
checkpoint::KeyReport load_checkpoint_in_model(torch::nn::Module& model, const std::filesystem::path& checkpoint,
                                               const LoadCheckpointOptions& options = {});

}  // namespace accelerate
