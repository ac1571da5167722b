// Weights kept on disk between uses, in Hugging Face Accelerate's offload
// folder format (accelerate.utils.offload_state_dict / load_offloaded_weights):
// one raw file per tensor, <name>.dat (its elements in C order, little-endian,
// as numpy.memmap writes them), and index.json, which gives each name's dtype
// (numpy's name; bf16 as "bfloat16") and shape. Folders written here are read
// by Accelerate, and the other way round.
//
//   accelerate::offload_state_dict("offload", {{"head.weight", head->weight}});
//   ...
//   accelerate::load_offloaded_weights(*model, accelerate::load_offload_index("offload"), "offload");
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace accelerate {

/// What index.json records for one offloaded tensor.
struct OffloadedWeight {
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<std::int64_t> shape;
  bool operator==(const OffloadedWeight&) const = default;
};

/// index.json: tensor name -> its dtype and shape.
using OffloadIndex = std::map<std::string, OffloadedWeight>;

/// Writes `weight` (any device; copied to the CPU) to <folder>/<name>.dat and
/// records it in `index` when given. The file is written beside and renamed
/// over the old one, so a tensor mapped from the old file keeps its values.
void offload_weight(const at::Tensor& weight, const std::string& name, const std::filesystem::path& folder,
                    OffloadIndex* index = nullptr);

/// Reads one tensor written by offload_weight() (or by Accelerate) into a new
/// CPU tensor. ConfigError if the file is missing or not the size `info` says.
at::Tensor load_offloaded_weight(const std::filesystem::path& file, const OffloadedWeight& info);

/// The same tensor, its memory a private mapping of the file instead of a
/// copy: pages are read when first touched, and unchanged ones stay in the
/// page cache, which the kernel may drop and read again, rather than in the
/// process's own memory. Writes to the tensor are copied on write and never
/// reach the file. Changing the file under the mapping other than through
/// offload_weight() (truncating it) makes reads of the tensor fault.
at::Tensor map_offloaded_weight(const std::filesystem::path& file, const OffloadedWeight& info);

/// Merges `index` into <folder>/index.json (entries of the same name replaced).
void save_offload_index(const OffloadIndex& index, const std::filesystem::path& folder);

/// <folder>/index.json; an empty index where there is none.
OffloadIndex load_offload_index(const std::filesystem::path& folder);

/// Offloads every tensor of `state_dict` into `folder` (created if needed) and
/// merges them into its index.json.
void offload_state_dict(const std::filesystem::path& folder, const std::map<std::string, at::Tensor>& state_dict);

/// Loads every tensor of `index` from `folder` into the parameter or buffer of
/// `model` of the same name, on the CPU, cast to the model tensor's dtype
/// (set_module_tensor_to_device()).
void load_offloaded_weights(torch::nn::Module& model, const OffloadIndex& index, const std::filesystem::path& folder);

}  // namespace accelerate
