#include "accelerate/modeling/module_sizes.hpp"

#include "modeling/module_walk.hpp"

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <set>

namespace accelerate {
namespace {

using modeling::named_tensors;
using modeling::TensorKind;
using torch::nn::Module;

bool keeps_own_size(c10::ScalarType type) {
  return c10::isIntegralType(type, /*includeBool=*/true);  // integers and bool are not converted on load
}

}  // namespace

ModuleSizes compute_module_sizes(const Module& module, std::optional<c10::ScalarType> dtype,
                                 const std::map<std::string, c10::ScalarType>& special_dtypes, bool buffers_only) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  if (!buffers_only) tensors = named_tensors(module, TensorKind::Parameters, /*unique=*/true);
  for (auto& buffer : named_tensors(module, TensorKind::Buffers, /*unique=*/true)) tensors.push_back(std::move(buffer));
  ModuleSizes sizes;
  for (const auto& [name, tensor] : tensors) {
    const auto own = static_cast<std::int64_t>(c10::elementSize(tensor.scalar_type()));
    std::int64_t element = own;
    if (const auto special = special_dtypes.find(name); special != special_dtypes.end()) {
      element = static_cast<std::int64_t>(c10::elementSize(special->second));
    } else if (dtype && !keeps_own_size(tensor.scalar_type())) {
      element = std::min(own, static_cast<std::int64_t>(c10::elementSize(*dtype)));
    }
    const std::int64_t size = tensor.numel() * element;
    // The tensor counts towards itself and every module above it, down to "".
    sizes[""] += size;
    for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
      sizes[name.substr(0, dot)] += size;
    }
    sizes[name] += size;
  }
  return sizes;
}

std::string module_class_name(const Module& module) {
  std::string name = module.name();
  // Drop template arguments, then the namespace, then LibTorch's Impl suffix.
  if (const auto angle = name.find('<'); angle != std::string::npos) name.erase(angle);
  if (const auto colon = name.rfind("::"); colon != std::string::npos) name.erase(0, colon + 2);
  constexpr std::string_view kImpl = "Impl";
  if (name.size() > kImpl.size() && name.compare(name.size() - kImpl.size(), kImpl.size(), kImpl) == 0) {
    name.erase(name.size() - kImpl.size());
  }
  return name;
}

LayerSize get_max_layer_size(const std::vector<NamedEntry>& entries, const ModuleSizes& sizes,
                             const std::vector<std::string>& no_split_module_classes) {
  LayerSize largest;
  std::deque<NamedEntry> to_treat(entries.begin(), entries.end());
  while (!to_treat.empty()) {
    const NamedEntry entry = std::move(to_treat.front());
    to_treat.pop_front();
    std::vector<NamedEntry> children;
    if (entry.module) {
      std::set<const Module*> seen;  // named_children() lists a module once
      for (const auto& child : entry.module->named_children()) {
        // Accelerate joins with a dot even under the empty name; so do we, to name the same layers.
        if (seen.insert(child.value().get()).second)
          children.push_back({entry.name + "." + child.key(), child.value()});
      }
    }
    const bool whole = children.empty() || std::find(no_split_module_classes.begin(), no_split_module_classes.end(),
                                                     module_class_name(*entry.module)) != no_split_module_classes.end();
    if (whole) {
      const std::int64_t size = modeling::size_or_zero(sizes, entry.name);
      if (size > largest.size) {
        largest.size = size;
        largest.names = {entry.name};
      } else if (size == largest.size) {
        largest.names.push_back(entry.name);
      }
    } else {
      to_treat.insert(to_treat.begin(), children.begin(), children.end());
    }
  }
  return largest;
}

MaximumSizes calculate_maximum_sizes(const Module& module, const std::vector<std::string>& no_split_module_classes) {
  const ModuleSizes sizes = compute_module_sizes(module);
  std::vector<NamedEntry> entries;
  for (const auto& item : module.named_parameters(/*recurse=*/false)) entries.push_back({item.key(), nullptr});
  std::set<const Module*> seen;
  for (const auto& child : module.named_children()) {
    if (seen.insert(child.value().get()).second) entries.push_back({child.key(), child.value()});
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) entries.push_back({item.key(), nullptr});
  return {modeling::size_or_zero(sizes, ""), get_max_layer_size(entries, sizes, no_split_module_classes)};
}

std::vector<std::shared_ptr<Module>> get_module_children_bottom_up(const std::shared_ptr<Module>& model) {
  std::vector<std::shared_ptr<Module>> top_down;
  std::vector<std::shared_ptr<Module>> stack{model};
  while (!stack.empty()) {
    std::shared_ptr<Module> current = std::move(stack.back());
    stack.pop_back();
    for (auto& [name, child] : modeling::unique_children(*current)) stack.push_back(std::move(child));
    top_down.push_back(std::move(current));
  }
  return {top_down.rbegin(), top_down.rend()};
}

std::vector<std::vector<std::string>> find_tied_parameters(const Module& module) {
  const auto every = named_tensors(module, TensorKind::Parameters, /*unique=*/false);
  const auto unique = named_tensors(module, TensorKind::Parameters, /*unique=*/true);
  std::set<std::string> first_names;
  for (const auto& [name, tensor] : unique) first_names.insert(name);
  std::vector<std::vector<std::string>> groups;
  for (const auto& [name, tensor] : unique) {
    std::set<std::string> names{name};
    for (const auto& [other, candidate] : every) {
      if (!first_names.count(other) && candidate.unsafeGetTensorImpl() == tensor.unsafeGetTensorImpl()) {
        names.insert(other);
      }
    }
    if (names.size() > 1) groups.emplace_back(names.begin(), names.end());
  }
  return groups;
}

}  // namespace accelerate
