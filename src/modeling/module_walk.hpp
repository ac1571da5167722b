// Walking a LibTorch module tree in the order PyTorch's Python modules walk
// theirs (named_modules, named_parameters, named_buffers), which is what the
// big-model utilities' names and results depend on. LibTorch's own
// named_parameters() lists a tensor shared by two modules under both names;
// PyTorch lists it once, under the name met first.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace accelerate::modeling {

/// The size compute_module_sizes() gave `name`; 0 for a name it did not list
/// (a module without tensors), as Accelerate's defaultdict gives.
inline std::int64_t size_or_zero(const std::map<std::string, std::int64_t>& sizes, const std::string& name) {
  const auto it = sizes.find(name);
  return it == sizes.end() ? 0 : it->second;
}

/// "a" + "b" -> "a.b"; "" + "b" -> "b".
std::string join_name(const std::string& prefix, const std::string& name);

/// Depth first, in registration order. With `seen`, a module met again under
/// another name is skipped together with its subtree (PyTorch's named_modules()).
void walk_modules(const torch::nn::Module& module, const std::string& prefix, std::set<const torch::nn::Module*>* seen,
                  const std::function<void(const std::string&, const torch::nn::Module&)>& visit);

enum class TensorKind { Parameters, Buffers };

/// named_parameters()/named_buffers() over the whole tree; with `unique`,
/// modules and tensors met again under another name are skipped.
std::vector<std::pair<std::string, at::Tensor>> named_tensors(const torch::nn::Module& module, TensorKind kind,
                                                              bool unique);

/// A module's children, each module once (PyTorch's named_children()).
std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> unique_children(
    const torch::nn::Module& module);

/// The submodule at a dotted name ("" is `root`), or null where the name does
/// not lead to a module (a tensor's name, or no such name).
const torch::nn::Module* find_submodule(const torch::nn::Module& root, const std::string& name);

}  // namespace accelerate::modeling
