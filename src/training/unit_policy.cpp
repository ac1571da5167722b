#include "accelerate/training/unit_policy.hpp"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <utility>

#include "accelerate/error.hpp"
#include "training/qualified_name.hpp"

namespace accelerate {

namespace {

std::int64_t direct_parameter_count(const torch::nn::Module& module) {
  std::int64_t count = 0;
  for (const auto& p : module.parameters(/*recurse=*/false)) count += p.numel();
  return count;
}

// size_based_wrap: returns the parameters below `module` (itself included)
// that no unit claims, after making it a unit when they are enough.
std::int64_t claim_by_size(const torch::nn::Module& module, const std::string& name, bool is_root,
                           std::int64_t min_num_params, std::vector<std::string>& units) {
  std::int64_t unclaimed = direct_parameter_count(module);
  for (const auto& child : module.named_children()) {
    unclaimed += claim_by_size(*child.value(), detail::qualified_name(name, child.key()), false, min_num_params, units);
  }
  if (!is_root && unclaimed >= min_num_params && unclaimed > 0) {
    units.push_back(name);
    return 0;
  }
  return unclaimed;
}

}  // namespace

UnitPolicy UnitPolicy::none() {
  return UnitPolicy([](const torch::nn::Module&) { return std::vector<std::string>{}; });
}

UnitPolicy UnitPolicy::by_class(std::vector<std::string> class_names) {
  if (class_names.empty()) {
    throw ConfigError(
        "UnitPolicy::by_class (transformer_based_wrap): no class name given. Name the class of the model's "
        "repeated block (transformer_cls_names_to_wrap), e.g. {\"Block\"} for a BlockImpl.");
  }
  return by_predicate([names = std::move(class_names)](const std::string&, const torch::nn::Module& module) {
    for (const std::string& name : names) {
      if (module_class_is(module, name)) return true;
    }
    return false;
  });
}

UnitPolicy UnitPolicy::by_size(std::int64_t min_num_params) {
  if (min_num_params <= 0) {
    throw ConfigError("UnitPolicy::by_size (size_based_wrap): min_num_params is " + std::to_string(min_num_params) +
                      "; it must be a positive number of parameters.");
  }
  return UnitPolicy([min_num_params](const torch::nn::Module& root) {
    std::vector<std::string> units;
    (void)claim_by_size(root, "", true, min_num_params, units);
    return units;
  });
}

UnitPolicy UnitPolicy::by_predicate(Predicate is_unit) {
  return UnitPolicy([is_unit = std::move(is_unit)](const torch::nn::Module& root) {
    std::vector<std::string> units;
    for (const auto& named : root.named_modules("", /*include_self=*/false)) {
      if (is_unit(named.key(), *named.value())) units.push_back(named.key());
    }
    return units;
  });
}

std::vector<std::string> UnitPolicy::select(const torch::nn::Module& root) const {
  if (select_) return select_(root);
  std::vector<std::string> units;
  if (dynamic_cast<const torch::nn::SequentialImpl*>(&root) != nullptr) {
    for (const auto& child : root.named_children()) {
      if (!child.value()->parameters(/*recurse=*/true).empty()) units.push_back(child.key());
    }
  }
  return units;
}

bool module_class_is(const torch::nn::Module& module, std::string_view class_name) {
  std::string_view full = module.name();
  if (full == class_name) return true;
  if (const auto colon = full.rfind("::"); colon != std::string_view::npos) full.remove_prefix(colon + 2);
  if (full == class_name) return true;
  constexpr std::string_view kImpl = "Impl";
  if (full.size() > kImpl.size() && full.substr(full.size() - kImpl.size()) == kImpl) {
    full.remove_suffix(kImpl.size());
  }
  return full == class_name;
}

}  // namespace accelerate
