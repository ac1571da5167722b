// Prints, as JSON, what the big-model utilities return for the trees of
// module_trees.hpp: the C++ half of the cross-check against Hugging Face
// Accelerate (module_sizes_crosscheck.py compares it with the Python half).
#include <nlohmann/json.hpp>

#include <iostream>

#include "accelerate/modeling/module_sizes.hpp"
#include "module_trees.hpp"

namespace {

namespace acc = accelerate;

nlohmann::json layer_json(const acc::LayerSize& layer) { return {layer.size, layer.names}; }

}  // namespace

int main() {
  const std::map<std::string, std::string> special{{"mlp", "0.weight"},
                                                   {"tied", "embed.weight"},
                                                   {"nested", "0.proj.weight"}};
  nlohmann::json out;
  for (const auto& [name, module] : acc::testing::trees::all()) {
    nlohmann::json& entry = out[name];
    entry["sizes"] = acc::compute_module_sizes(*module);
    entry["sizes_bf16"] = acc::compute_module_sizes(*module, at::kBFloat16);
    entry["sizes_fp16_special"] = acc::compute_module_sizes(*module, at::kHalf, {{special.at(name), at::kFloat}});
    entry["buffers_only"] = acc::compute_module_sizes(*module, std::nullopt, {}, /*buffers_only=*/true);
    const std::vector<std::string> no_split =
        name == "nested" ? std::vector<std::string>{"Block"} : std::vector<std::string>{};
    const auto maximum = acc::calculate_maximum_sizes(*module, no_split);
    entry["maximum"] = {maximum.total_size, layer_json(maximum.largest_layer)};
    std::vector<acc::NamedEntry> children;
    for (const auto& child : module->named_children()) children.push_back({child.key(), child.value()});
    entry["max_layer_of_children"] =
        layer_json(acc::get_max_layer_size(children, acc::compute_module_sizes(*module), {"Block", "Linear"}));
    entry["tied"] = acc::find_tied_parameters(*module);
  }
  std::cout << out.dump(1) << '\n';
  return 0;
}
