#include "modeling/module_walk.hpp"

namespace accelerate::modeling {

using torch::nn::Module;

std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

void walk_modules(const Module& module, const std::string& prefix, std::set<const Module*>* seen,
                  const std::function<void(const std::string&, const Module&)>& visit) {
  if (seen != nullptr && !seen->insert(&module).second) return;
  visit(prefix, module);
  for (const auto& child : module.named_children())
    walk_modules(*child.value(), join_name(prefix, child.key()), seen, visit);
}

std::vector<std::pair<std::string, at::Tensor>> named_tensors(const Module& module, TensorKind kind, bool unique) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  std::set<const Module*> seen_modules;
  std::set<const c10::TensorImpl*> seen_tensors;
  walk_modules(module, "", unique ? &seen_modules : nullptr, [&](const std::string& prefix, const Module& m) {
    const auto own =
        kind == TensorKind::Parameters ? m.named_parameters(/*recurse=*/false) : m.named_buffers(/*recurse=*/false);
    for (const auto& item : own) {
      if (!item.value().defined()) continue;
      if (unique && !seen_tensors.insert(item.value().unsafeGetTensorImpl()).second) continue;
      out.emplace_back(join_name(prefix, item.key()), item.value());
    }
  });
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> unique_children(const Module& module) {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::set<const Module*> seen;
  for (const auto& child : module.named_children()) {
    if (seen.insert(child.value().get()).second) out.emplace_back(child.key(), child.value());
  }
  return out;
}

const Module* find_submodule(const Module& root, const std::string& name) {
  const Module* current = &root;
  std::size_t begin = 0;
  while (current && begin < name.size()) {
    const std::size_t dot = std::min(name.find('.', begin), name.size());
    const auto children = current->named_children();
    const auto* child = children.find(name.substr(begin, dot - begin));
    current = child != nullptr ? child->get() : nullptr;
    begin = dot + 1;
  }
  return current;
}

}  // namespace accelerate::modeling
