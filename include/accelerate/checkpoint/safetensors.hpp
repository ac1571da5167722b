// Model export in Hugging Face's safetensors format (save_model) and loading
// of exported weights (load_checkpoint_in_model): a single model.safetensors,
// or shards model-0000i-of-0000n.safetensors plus model.safetensors.index.json.
// Files are readable by Python's `safetensors` and `transformers`.
// These functions are local (not collective): call them on the main process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "accelerate/checkpoint/key_report.hpp"

namespace at {
class Tensor;
}

namespace accelerate::checkpoint {

struct SaveModelOptions {
  /// Largest shard in bytes (Accelerate's default "10GB"); a single tensor
  /// larger than this gets a shard of its own.
  std::uint64_t max_shard_size = 10'000'000'000ULL;
  /// Only safetensors is supported; false throws ConfigError.
  bool safe_serialization = true;
};

/// Writes `tensors` (name -> tensor, e.g. a model's named parameters and
/// buffers) into `directory`; returns the files written (shards first, then
/// the index when sharded). Tensors are written from their storage (CPU
/// contiguous tensors are not copied).
std::vector<std::filesystem::path> save_model(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                              const std::filesystem::path& directory,
                                              const SaveModelOptions& options = {});

/// Writes `tensors` into one .safetensors file (names unique, dtypes the
/// format holds; ConfigError otherwise, before the file is touched).
void save_safetensors(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::filesystem::path& file);

/// Every tensor of one .safetensors file.
std::map<std::string, at::Tensor> load_safetensors(const std::filesystem::path& file);

/// Loads weights into `destinations` (name -> existing tensor, copied in
/// place) from a .safetensors file, an index .json, a folder holding either,
/// or one of this library's HDF5 checkpoints: a checkpoint directory (also
/// one saved with save_on_each_node) or its state file. From a checkpoint
/// the pytorch_model group is read, every read checksum-verified; that needs
/// MPI initialised (e.g. a State) and reads on this process alone. strict:
/// any missing, unexpected or mis-shaped key throws ConfigError listing all
/// of them; otherwise matching keys are loaded and the report returned.
KeyReport load_checkpoint_in_model(const std::map<std::string, at::Tensor>& destinations,
                                   const std::filesystem::path& checkpoint, bool strict = false);

/// Calls `visit(name, tensor)` for every model tensor of `checkpoint` (any
/// path load_checkpoint_in_model() takes), in the file's dtype, on the CPU.
/// One safetensors file, or one HDF5 entry, is in memory at a time.
void for_each_model_tensor(const std::filesystem::path& checkpoint,
                           const std::function<void(const std::string& name, const at::Tensor& tensor)>& visit);

}  // namespace accelerate::checkpoint
