// How big a module tree is, per submodule and per tensor: the first of the
// big-model utilities (Hugging Face Accelerate's accelerate.utils.modeling),
// with their names and semantics. They answer "what is the largest piece that
// must stay whole on one device" before a model is placed or sharded.
//
//   auto sizes = accelerate::compute_module_sizes(*net);             // sizes[""]: the whole model
//   auto [total, largest] = accelerate::calculate_maximum_sizes(*net);
//   auto tied = accelerate::find_tied_parameters(*net);              // {{"embed.weight", "head_weight"}}
//
// Trees are walked as PyTorch walks them: a submodule registered under two
// names, or a tensor under two names, is counted once, under the name met
// first (depth first, in registration order; parameters before buffers).
// One difference from Accelerate: a bool element counts one byte, which is
// what it occupies, where Accelerate counts an eighth.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace accelerate {

/// Bytes per name: "" is the whole module, "fc1" a submodule, "fc1.weight" a tensor.
using ModuleSizes = std::map<std::string, std::int64_t>;

/// The size of every submodule and tensor of `module` (parameters and
/// buffers). With `dtype`, floating-point tensors count at most that type's
/// size (a model to be loaded in bf16); integer and bool tensors keep their
/// own. `special_dtypes` overrides the type of named tensors. `buffers_only`
/// counts the buffers alone.
ModuleSizes compute_module_sizes(const torch::nn::Module& module, std::optional<c10::ScalarType> dtype = std::nullopt,
                                 const std::map<std::string, c10::ScalarType>& special_dtypes = {},
                                 bool buffers_only = false);

/// The name that `no_split_module_classes` lists: the module's class without
/// its namespace and LibTorch's `Impl` suffix ("torch::nn::LinearImpl" is
/// "Linear", a user's `my::Block` is "Block").
std::string module_class_name(const torch::nn::Module& module);

/// An entry of the list get_max_layer_size() scans: a submodule, or a tensor
/// (module null), by its name in `sizes`.
struct NamedEntry {
  std::string name;
  std::shared_ptr<const torch::nn::Module> module;
};

/// The largest layer and every layer of that size, in scan order.
struct LayerSize {
  std::int64_t size = 0;
  std::vector<std::string> names;
};

/// Scans `entries` depth first and returns the largest "layer": a tensor, a
/// module without children, or a module whose class is in
/// `no_split_module_classes` (it is not descended into). Sizes come from `sizes`.
LayerSize get_max_layer_size(const std::vector<NamedEntry>& entries, const ModuleSizes& sizes,
                             const std::vector<std::string>& no_split_module_classes);

struct MaximumSizes {
  std::int64_t total_size = 0;
  LayerSize largest_layer;
};

/// The whole module's size and its largest layer, scanning its own
/// parameters, then its children, then its own buffers.
MaximumSizes calculate_maximum_sizes(const torch::nn::Module& module,
                                     const std::vector<std::string>& no_split_module_classes = {});

/// Every module of `model` with its children before it, the model last
/// (Accelerate's get_module_children_bottom_up): a depth-first walk that
/// takes the last child first, reversed. A module registered in two places
/// is listed at each.
std::vector<std::shared_ptr<torch::nn::Module>> get_module_children_bottom_up(
    const std::shared_ptr<torch::nn::Module>& model);

/// Parameters registered under several names: one sorted list of names per
/// shared tensor, the lists ordered by the first name under which the tensor
/// is met.
std::vector<std::vector<std::string>> find_tied_parameters(const torch::nn::Module& module);

}  // namespace accelerate
