// Where each piece of a model goes when the model does not fit one device:
// Hugging Face Accelerate's device maps (accelerate.utils.modeling), with
// their names and semantics. GPUs are filled first, in order, then the CPU,
// then the disk; a main device (GPU 0, the CPU) keeps room for the largest
// layer so that an offloaded layer can be brought back to run.
//
//   accelerate::PlacementOptions options{.no_split_module_classes = {"Block"}};
//   auto budget = accelerate::get_balanced_memory(*model, accelerate::MaxMemory{{"0", 8 << 30}, {"1", 8 << 30},
//                                                                             {"cpu", 64LL << 30}}, options);
//   auto map = accelerate::infer_auto_device_map(*model, budget, options);
//   // {"embed": "0", "layers.0": "0", ..., "layers.9": "1", "head": "cpu"}
//
// Devices are named as in Accelerate's maps: a GPU by its ordinal ("0",
// "1"), "cpu", "disk". Everything here is computed from the tensors' sizes and
// types, so the model may be anywhere (on the meta device too).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace accelerate {

/// Bytes each device may hold: {"0": bytes, "1": bytes, "cpu": bytes, "disk": bytes}.
using MaxMemory = std::map<std::string, std::int64_t>;

/// Where each module or tensor goes, by dotted name ("" is the whole model):
/// {"embed": "0", "layers.3.mlp": "1", "head.weight": "cpu"}. A name covers
/// everything below it.
using DeviceMap = std::map<std::string, std::string>;

/// What infer_auto_device_map() and get_balanced_memory() take besides the
/// model and the budget (Accelerate's keyword arguments of the same names).
struct PlacementOptions {
  /// Classes never split across devices (module_class_name(): "Block" for
  /// `my::BlockImpl`), e.g. anything with a residual connection.
  std::vector<std::string> no_split_module_classes;
  /// Size the floating-point tensors as if loaded in this type.
  std::optional<c10::ScalarType> dtype;
  /// Per-tensor types that override `dtype`.
  std::map<std::string, c10::ScalarType> special_dtypes;
  /// infer_auto_device_map(): merge the entries of a module that all went to
  /// one device into one entry for the module.
  bool clean_result = true;
  /// infer_auto_device_map(): whether the buffers of layers offloaded to the
  /// CPU or the disk are offloaded too. Without it, they are meant to be
  /// kept on a GPU, and `warn` is told when no GPU has room for them.
  bool offload_buffers = false;
  /// get_balanced_memory(): put as little as possible on GPU 0, which the
  /// caller wants for other work.
  bool low_zero = false;
  /// Where warnings go; empty: standard error, prefixed "[accelerate]".
  std::function<void(const std::string&)> warn;
};

/// "5GB" -> 5'000'000'000, "1.5GiB" -> 1'610'612'736, "500MB", "64KiB",
/// "8Gb" (bits: an eighth), "123" (bytes): Accelerate's convert_file_size_to_int.
/// Throws ConfigError on anything else.
std::int64_t convert_file_size_to_int(std::string_view size);

/// The budget with its devices checked ("mps" and other names are a
/// ConfigError). Without one: every visible GPU's free memory (builds with
/// CUDA) and the CPU's available memory.
MaxMemory get_max_memory(const std::optional<MaxMemory>& max_memory = std::nullopt);

/// The devices of a budget in the order they are filled: GPUs by ordinal,
/// then "cpu", then "disk".
std::vector<std::string> device_order(const MaxMemory& max_memory);

/// A budget that spreads the model evenly over the GPUs instead of filling
/// the first ones: each GPU but the last is capped at the model's size over
/// the number of GPUs plus 1.25 times the larger of the biggest no-split
/// module and the mean leaf module. The last GPU and the CPU keep their budget.
MaxMemory get_balanced_memory(const torch::nn::Module& model, const std::optional<MaxMemory>& max_memory = std::nullopt,
                              const PlacementOptions& options = {});

/// The device map: modules in order, each on the current device while it
/// fits, split into its parameters and children where it does not (unless it
/// has none or its class is in `no_split_module_classes`), and the next
/// device where it cannot be split. Tied parameters go where the first of
/// them goes. The disk takes whatever is left. Every tensor of the model is
/// covered by the result (check_device_map() passes).
DeviceMap infer_auto_device_map(const torch::nn::Module& model,
                                const std::optional<MaxMemory>& max_memory = std::nullopt,
                                const PlacementOptions& options = {});

/// Merges the entries of a module that all went to one device into one
/// entry for the module, from the top down.
DeviceMap clean_device_map(DeviceMap device_map);

/// Throws ConfigError naming every parameter and buffer that no entry of
/// `device_map` covers, and every device that is not a GPU ordinal, "cpu"
/// or "disk".
void check_device_map(const torch::nn::Module& model, const DeviceMap& device_map);

/// The device the map gives the tensor or module `name`: the entry with the
/// longest name that is `name` or one of its parents. Throws ConfigError where
/// none is.
const std::string& device_of(const DeviceMap& device_map, const std::string& name);

}  // namespace accelerate
