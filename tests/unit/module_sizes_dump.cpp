// Prints, as JSON, what the big-model utilities return for the trees of
// module_trees.hpp: the C++ half of the cross-check against Hugging Face
// Accelerate (module_sizes_crosscheck.py compares it with the Python half).
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include "accelerate/modeling/device_map.hpp"
#include "accelerate/modeling/empty_weights.hpp"
#include "accelerate/modeling/module_sizes.hpp"
#include "accelerate/modeling/offload.hpp"
#include "module_trees.hpp"

namespace {

namespace acc = accelerate;

nlohmann::json layer_json(const acc::LayerSize& layer) { return {layer.size, layer.names}; }

nlohmann::json options_json(const acc::PlacementOptions& options) {
  return {{"no_split_module_classes", options.no_split_module_classes},
          {"dtype", options.dtype ? "bfloat16" : ""},
          {"clean_result", options.clean_result},
          {"offload_buffers", options.offload_buffers},
          {"low_zero", options.low_zero}};
}

// Budgets as fractions of the model's size: several GPUs, the CPU, the disk,
// and budgets too small for one layer, so that splitting, ties and the
// reserve for the largest layer are all exercised.
const std::vector<std::vector<std::pair<std::string, double>>> kBudgets{
    {{"0", 0.5}, {"1", 0.5}, {"cpu", 1.0}},
    {{"0", 0.3}, {"1", 0.3}, {"cpu", 0.3}},
    {{"0", 0.6}, {"cpu", 0.6}},
    {{"cpu", 0.5}},
    {{"0", 0.2}, {"1", 0.4}, {"2", 0.5}, {"cpu", 2.0}},
    {{"0", 0.15}, {"1", 0.15}, {"cpu", 0.15}, {"disk", 1.0}},
    {{"0", 2.0}},
};

// Every budget with every option set that changes the result, and the
// balanced budgets (get_balanced_memory) with the maps they lead to.
nlohmann::json device_map_cases(const std::string& tree, const torch::nn::Module& module,
                                const std::vector<std::string>& no_split) {
  const auto total = static_cast<double>(acc::compute_module_sizes(module).at(""));
  std::vector<acc::PlacementOptions> variants(5);
  variants[1].no_split_module_classes = no_split;
  variants[2].dtype = at::kBFloat16;
  variants[3].clean_result = false;
  variants[4].offload_buffers = true;
  nlohmann::json cases = nlohmann::json::array();
  auto run = [&](const acc::MaxMemory& budget, acc::PlacementOptions options) {
    bool warned = false;
    options.warn = [&](const std::string&) { warned = true; };
    cases.push_back({{"tree", tree},
                     {"max_memory", budget},
                     {"options", options_json(options)},
                     {"device_map", acc::infer_auto_device_map(module, budget, options)},
                     {"warned", warned}});
  };
  for (const auto& fractions : kBudgets) {
    acc::MaxMemory budget;
    for (const auto& [device, fraction] : fractions) budget[device] = static_cast<std::int64_t>(total * fraction);
    for (const auto& options : variants) run(budget, options);
  }
  return cases;
}

nlohmann::json balanced_cases(const std::string& tree, const torch::nn::Module& module,
                              const std::vector<std::string>& no_split) {
  const auto total = acc::compute_module_sizes(module).at("");
  nlohmann::json cases = nlohmann::json::array();
  const std::vector<acc::MaxMemory> budgets{{{"0", 10 * total}, {"1", 10 * total}, {"2", 10 * total}, {"cpu", total}},
                                            {{"0", 10 * total}, {"1", total / 3}, {"cpu", 10 * total}},
                                            {{"0", total / 4}, {"1", total / 4}, {"2", total / 4}, {"3", total}}};
  for (const auto& budget : budgets) {
    for (const bool low_zero : {false, true}) {
      for (const bool with_no_split : {false, true}) {
        acc::PlacementOptions options;
        options.low_zero = low_zero;
        if (with_no_split) options.no_split_module_classes = no_split;
        options.warn = [](const std::string&) {};
        const auto balanced = acc::get_balanced_memory(module, budget, options);
        cases.push_back({{"tree", tree},
                         {"max_memory", budget},
                         {"options", options_json(options)},
                         {"balanced", balanced},
                         {"device_map", acc::infer_auto_device_map(module, balanced, options)}});
      }
    }
  }
  return cases;
}

// The tensors both sides offload, built alike in module_sizes_crosscheck.py:
// every dtype the format holds, and a 0-d tensor.
std::map<std::string, at::Tensor> offload_reference() {
  return {{"embed.weight", torch::arange(24, torch::kFloat).reshape({4, 6}) / 7},
          {"half", torch::arange(10, torch::kFloat).to(torch::kHalf) * 0.5},
          {"bf16", (torch::arange(12, torch::kFloat) * 0.25).reshape({3, 4}).to(torch::kBFloat16)},
          {"double", torch::arange(4, torch::kDouble).reshape({2, 2}) / 3},
          {"ids", torch::arange(5, torch::kLong) * 3 - 4},
          {"small", torch::arange(-3, 3, torch::kLong).to(torch::kChar)},
          {"bytes", torch::arange(7, torch::kLong).to(torch::kByte)},
          {"mask", torch::tensor({true, false, true})},
          {"scalar", torch::tensor(2.5, torch::kDouble)}};
}

// Reads a folder Accelerate offloaded the reference into; 0 when every tensor
// comes back with its dtype, shape and values.
int check_offload_folder(const std::string& folder) {
  const auto index = acc::load_offload_index(folder);
  int wrong = 0;
  for (const auto& [name, expected] : offload_reference()) {
    const auto entry = index.find(name);
    if (entry == index.end()) {
      std::cout << name << ": not in Accelerate's index.json\n";
      ++wrong;
      continue;
    }
    const at::Tensor ours = acc::load_offloaded_weight(std::filesystem::path(folder) / (name + ".dat"), entry->second);
    if (ours.scalar_type() != expected.scalar_type() || ours.sizes() != expected.sizes() ||
        !torch::equal(ours, expected)) {
      std::cout << name << ": read " << ours << " where Accelerate wrote " << expected << '\n';
      ++wrong;
    }
  }
  std::cout << (wrong == 0 ? "every tensor of Accelerate's offload folder reads back exactly\n" : "");
  return wrong == 0 ? 0 : 1;
}

}  // namespace

// usage: module_sizes_dump                      (the JSON of our results)
//        module_sizes_dump empty                (the same for the trees built empty)
//        module_sizes_dump offload-write DIR    (our offload folder of the reference tensors)
//        module_sizes_dump offload-check DIR    (reads Accelerate's folder of them)
int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "offload-write") {
    acc::offload_state_dict(argv[2], offload_reference());
    return 0;
  }
  if (argc == 3 && std::string(argv[1]) == "offload-check") return check_offload_folder(argv[2]);
  const std::map<std::string, std::string> special{{"mlp", "0.weight"},
                                                   {"tied", "embed.weight"},
                                                   {"nested", "0.proj.weight"},
                                                   {"lm", "layers.0.proj.weight"}};
  // "empty": the trees built by init_empty_weights, their tensors on the meta device.
  const bool empty = argc == 2 && std::string(argv[1]) == "empty";
  nlohmann::json out;
  for (const auto& [name, whole] : acc::testing::trees::all()) {
    const auto module =
        empty ? acc::init_empty_weights([&, name = name] { return acc::testing::trees::all().at(name); }) : whole;
    nlohmann::json& entry = out[name];
    entry["on_meta"] = acc::meta_tensor_names(*module);
    entry["sizes"] = acc::compute_module_sizes(*module);
    entry["sizes_bf16"] = acc::compute_module_sizes(*module, at::kBFloat16);
    entry["sizes_fp16_special"] = acc::compute_module_sizes(*module, at::kHalf, {{special.at(name), at::kFloat}});
    entry["buffers_only"] = acc::compute_module_sizes(*module, std::nullopt, {}, /*buffers_only=*/true);
    const std::vector<std::string> no_split =
        name == "nested" || name == "lm" ? std::vector<std::string>{"Block"} : std::vector<std::string>{};
    const auto maximum = acc::calculate_maximum_sizes(*module, no_split);
    entry["maximum"] = {maximum.total_size, layer_json(maximum.largest_layer)};
    std::vector<acc::NamedEntry> children;
    for (const auto& child : module->named_children()) children.push_back({child.key(), child.value()});
    entry["max_layer_of_children"] =
        layer_json(acc::get_max_layer_size(children, acc::compute_module_sizes(*module), {"Block", "Linear"}));
    entry["tied"] = acc::find_tied_parameters(*module);
    const std::vector<std::string> no_split_classes =
        name == "mlp" ? std::vector<std::string>{"Linear"} : std::vector<std::string>{"Block"};
    for (auto& c : device_map_cases(name, *module, no_split_classes)) out["device_maps"].push_back(std::move(c));
    for (auto& c : balanced_cases(name, *module, no_split_classes)) out["balanced"].push_back(std::move(c));
  }
  std::cout << out.dump(1) << '\n';
  return 0;
}
