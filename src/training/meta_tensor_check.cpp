#include "training/meta_tensor_check.hpp"

#include "accelerate/error.hpp"

namespace accelerate::training_detail {

std::vector<std::pair<std::string, at::Tensor>> named_module_tensors(const torch::nn::Module& module) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) tensors.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers(/*recurse=*/true)) tensors.emplace_back(item.key(), item.value());
  return tensors;
}

std::string first_meta_tensor(const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  for (const auto& [name, tensor] : tensors) {
    if (tensor.defined() && tensor.is_meta()) return name;
  }
  return {};
}

std::string meta_tensor_problem(const std::string& name, const std::string& action) {
  return name +
         " is on the meta device (the model was built by init_empty_weights and this tensor was not "
         "loaded): load its values on every rank (load_checkpoint_in_model, set_module_tensor_to_device) "
         "before " +
         action;
}

void refuse_meta_tensors(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                         std::initializer_list<ProcessGroup*> groups, const std::string& who,
                         const std::string& action) {
  const std::string mine = first_meta_tensor(tensors);
  for (ProcessGroup* group : groups) {
    if (group == nullptr) continue;
    const auto all = group->all_gather_object(c10::IValue(mine));
    for (std::size_t r = 0; r < all.size(); ++r) {
      const std::string& name = all[r].toStringRef();
      if (!name.empty()) {
        throw ConfigError(who + ": on rank " + std::to_string(r) + " of its group, " +
                          meta_tensor_problem(name, action) + ".");
      }
    }
  }
}

}  // namespace accelerate::training_detail
