// save and load: torch.save and torch.load for jobs of many processes
// (seeds: accelerate.utils.save and accelerate.utils.load).
//
// save writes a map of named tensors once per job (the main process) or once
// per node (each node's local main process, for node-local disks), and the
// other processes return at once: it is not collective, as in Accelerate.
// The file is torch.save's format (a pickled dict that Python's torch.load
// reads) or, with safe_serialization, a safetensors file. It is written
// beside its destination and renamed over it, so a failed save leaves the
// previous file as it was. load reads either format, told apart by content.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace accelerate {
class State;
}

namespace accelerate::checkpoint {

struct SaveOptions {
  /// Write on each node's local main process instead of the main process
  /// only (Accelerate's save_on_each_node; for node-local paths).
  bool save_on_each_node = false;
  /// A safetensors file instead of torch.save's pickled dict.
  bool safe_serialization = false;
};

/// Writes `tensors` to `file` on the processes `options` names; returns
/// whether this process wrote. Throws ConfigError on the writing process for
/// an unwritable path or a dtype the format cannot hold.
bool save(const State& state, const std::map<std::string, at::Tensor>& tensors, const std::filesystem::path& file,
          const SaveOptions& options = {});

/// Reads a file written by save, by Python's torch.save of a dict of tensors,
/// or any safetensors file. `map_location` moves every tensor to that device;
/// unset, tensors come back on the CPU. Throws ConfigError naming the file
/// when it is missing, of another format, or not a dict of named tensors.
std::map<std::string, at::Tensor> load(const std::filesystem::path& file,
                                       std::optional<c10::Device> map_location = std::nullopt);

}  // namespace accelerate::checkpoint
