#include "accelerate/modeling/device_map.hpp"

#include <algorithm>
#include <cctype>
#include <deque>
#include <fstream>
#include <iostream>
#include <set>

#include <unistd.h>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/modeling/module_sizes.hpp"
#include "detail/byte_size.hpp"
#include "modeling/module_walk.hpp"

#if ACCELERATE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace accelerate {
namespace {

using torch::nn::Module;

bool is_gpu(const std::string& device) {
  return !device.empty() && device.size() <= 9 &&
         std::all_of(device.begin(), device.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

// `name` is `module` or lies below it ("" is above everything).
bool is_within(const std::string& name, const std::string& module) {
  return module.empty() || name == module || starts_with(name, module + ".");
}

void warn(const PlacementOptions& options, const std::string& message) {
  if (options.warn) {
    options.warn(message);
  } else {
    std::cerr << "[accelerate] " << detail::where() << ' ' << message << '\n' << std::flush;
  }
}

bool is_no_split(const Module& module, const std::vector<std::string>& classes) {
  return std::find(classes.begin(), classes.end(), module_class_name(module)) != classes.end();
}

// One entry of the list infer_auto_device_map() works through: a module, or a
// tensor (module null), by its full name.
struct Item {
  std::string name;
  std::shared_ptr<Module> module;
};

std::vector<Item> own_parameters(const Module& module, const std::string& prefix) {
  std::vector<Item> out;
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    if (item.value().defined()) out.push_back({modeling::join_name(prefix, item.key()), nullptr});
  }
  return out;
}

std::vector<Item> own_children(const Module& module, const std::string& prefix) {
  std::vector<Item> out;
  for (auto& [name, child] : modeling::unique_children(module))
    out.push_back({modeling::join_name(prefix, name), std::move(child)});
  return out;
}

std::vector<std::string> own_buffers(const Module& module, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    if (item.value().defined()) out.push_back(modeling::join_name(prefix, item.key()));
  }
  return out;
}

// The largest layer among the modules of `items` (tensors left out, as
// Accelerate leaves them out once the work has started).
LayerSize largest_module_layer(const std::deque<Item>& items, const ModuleSizes& sizes,
                               const std::vector<std::string>& no_split) {
  std::vector<NamedEntry> modules;
  for (const auto& item : items) {
    if (item.module) modules.push_back({item.name, item.module});
  }
  return get_max_layer_size(modules, sizes, no_split);
}

std::deque<Item>::iterator find_item(std::deque<Item>& items, const std::string& name) {
  return std::find_if(items.begin(), items.end(), [&](const Item& item) { return item.name == name; });
}

// The names compute_module_sizes() counts, in the order it first meets them:
// each tensor's enclosing modules from the top, then the tensor.
std::vector<std::string> sized_names_in_order(const Module& model) {
  std::vector<std::string> order;
  std::set<std::string> seen;
  auto add = [&](const std::string& name) {
    if (seen.insert(name).second) order.push_back(name);
  };
  for (const auto kind : {modeling::TensorKind::Parameters, modeling::TensorKind::Buffers}) {
    for (const auto& [name, tensor] : modeling::named_tensors(model, kind, /*unique=*/true)) {
      add("");
      for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
        add(name.substr(0, dot));
      add(name);
    }
  }
  return order;
}

// Accelerate's get_module_leaves(): the names none of whose children is listed.
std::vector<std::string> leaves_of(const ModuleSizes& sizes) {
  std::map<std::string, int> children;
  for (const auto& [name, size] : sizes) {
    if (const auto dot = name.rfind('.'); dot != std::string::npos) ++children[name.substr(0, dot)];
  }
  std::vector<std::string> leaves;
  for (const auto& [name, size] : sizes) {
    if (!name.empty() && children.count(name) == 0) leaves.push_back(name);
  }
  return leaves;
}

std::int64_t host_available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : 0;
}

void add_visible_gpus(MaxMemory& out) {
#if ACCELERATE_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: a CPU-only budget
    return;
  }
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) return;
  for (int device = 0; device < count; ++device) {
    std::size_t free = 0;
    std::size_t total = 0;
    if (cudaSetDevice(device) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess) {
      out[std::to_string(device)] = static_cast<std::int64_t>(free);
    } else {
      (void)cudaGetLastError();  // an unusable device is left out, as Accelerate leaves it
    }
  }
  (void)cudaSetDevice(current);
#else
  (void)out;
#endif
}

}  // namespace

std::int64_t convert_file_size_to_int(std::string_view size) {
  return detail::parse_byte_size(size, "convert_file_size_to_int");
}

std::vector<std::string> device_order(const MaxMemory& max_memory) {
  std::vector<std::string> gpus;
  for (const auto& [device, bytes] : max_memory) {
    if (is_gpu(device)) gpus.push_back(device);
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const std::string& a, const std::string& b) { return std::stol(a) < std::stol(b); });
  for (const char* other : {"cpu", "disk"}) {
    if (max_memory.count(other) != 0) gpus.emplace_back(other);
  }
  return gpus;
}

MaxMemory get_max_memory(const std::optional<MaxMemory>& max_memory) {
  if (!max_memory) {
    MaxMemory out;
    add_visible_gpus(out);
    out["cpu"] = host_available_memory();
    return out;
  }
  for (const auto& [device, bytes] : *max_memory) {
    if (!is_gpu(device) && device != "cpu" && device != "disk") {
      throw ConfigError(detail::where() + " max_memory names the device '" + device +
                        "': devices are GPU ordinals (\"0\", \"1\", ...), \"cpu\" and \"disk\"");
    }
    if (bytes < 0) {
      throw ConfigError(detail::where() + " max_memory gives device '" + device + "' " + std::to_string(bytes) +
                        " bytes: a budget is 0 or more bytes");
    }
  }
  return *max_memory;
}

MaxMemory get_balanced_memory(const Module& model, const std::optional<MaxMemory>& max_memory,
                              const PlacementOptions& options) {
  MaxMemory budget = get_max_memory(max_memory);
  std::vector<std::string> gpus;
  for (const auto& device : device_order(budget)) {
    if (is_gpu(device) && budget.at(device) > 0) gpus.push_back(device);
  }
  if (gpus.empty()) return budget;
  bool low_zero = options.low_zero;
  if (gpus.size() == 1) {
    low_zero = false;  // nothing to move GPU 0's share to
    // A budget measured here, not given: keep a tenth of the one GPU for activations.
    if (!max_memory) budget[gpus.front()] = static_cast<std::int64_t>(static_cast<double>(budget[gpus.front()]) * 0.9);
  }
  ModuleSizes sizes = compute_module_sizes(model, options.dtype, options.special_dtypes);
  const auto sharing = static_cast<std::int64_t>(low_zero ? gpus.size() - 1 : gpus.size());
  std::int64_t per_gpu = modeling::size_or_zero(sizes, "") / sharing;

  // Each GPU gets room for one more of the largest no-split modules (the first
  // of each class met), or of the mean leaf module if that is larger.
  std::int64_t no_split_size = 0;
  if (!options.no_split_module_classes.empty()) {
    std::map<std::string, std::int64_t> first_of_class;
    for (const auto& name : sized_names_in_order(model)) {
      if (name.empty()) continue;
      const Module* module = modeling::find_submodule(model, name);
      if (!module) continue;
      const std::string cls = module_class_name(*module);
      if (is_no_split(*module, options.no_split_module_classes) && first_of_class.count(cls) == 0)
        first_of_class[cls] = modeling::size_or_zero(sizes, name);
      if (first_of_class.size() ==
          std::set<std::string>(options.no_split_module_classes.begin(), options.no_split_module_classes.end()).size())
        break;
    }
    for (const auto& [cls, size] : first_of_class) no_split_size = std::max(no_split_size, size);
  }
  // The first leaves are tensors; once they are removed, the leaves are the innermost modules.
  for (const auto& leaf : leaves_of(sizes)) sizes.erase(leaf);
  const auto leaves = leaves_of(sizes);
  std::int64_t leaf_sum = 0;
  for (const auto& leaf : leaves) leaf_sum += sizes.at(leaf);
  const auto mean_leaf = static_cast<std::int64_t>(static_cast<double>(leaf_sum) /
                                                   static_cast<double>(std::max<std::size_t>(leaves.size(), 1)));
  per_gpu += static_cast<std::int64_t>(1.25 * static_cast<double>(std::max(no_split_size, mean_leaf)));

  // The last GPU keeps its whole budget, in case the margin was not enough.
  for (std::size_t i = 0; i + 1 < gpus.size(); ++i) {
    const bool keep_zero = low_zero && gpus[i] == "0";
    budget[gpus[i]] = std::min(keep_zero ? budget[gpus[i]] : per_gpu, budget[gpus[i]]);
  }
  if (low_zero && budget.count("0") != 0) {
    std::int64_t others = 0;
    for (const auto& gpu : gpus) {
      if (gpu != "0") others += budget[gpu];
    }
    budget["0"] = std::min(std::max<std::int64_t>(0, modeling::size_or_zero(sizes, "") - others), budget["0"]);
  }
  return budget;
}

DeviceMap infer_auto_device_map(const Module& model, const std::optional<MaxMemory>& max_memory,
                                const PlacementOptions& options) {
  const MaxMemory budget = get_max_memory(max_memory);
  const auto& no_split = options.no_split_module_classes;
  std::vector<std::string> devices = device_order(budget);
  if (std::find(devices.begin(), devices.end(), "disk") == devices.end()) devices.emplace_back("disk");
  std::vector<std::string> main_devices{"cpu"};
  if (is_gpu(devices.front())) main_devices = {devices.front(), "cpu"};

  const ModuleSizes sizes = compute_module_sizes(model, options.dtype, options.special_dtypes);
  const auto tied_groups = find_tied_parameters(model);
  const auto buffer_size = [&](const Module& module) {
    return modeling::size_or_zero(compute_module_sizes(module, options.dtype, options.special_dtypes,
                                                       /*buffers_only=*/true),
                                  "");
  };

  // The entries in the order they were placed, and the split modules' own
  // buffers, which splitting does not list (as in Accelerate) and which are
  // placed with the module's first piece once everything else is.
  std::vector<std::pair<std::string, std::string>> placed;
  std::vector<std::pair<std::string, std::vector<std::string>>> split_buffers;
  std::map<std::string, std::int64_t> device_memory_used;
  std::map<std::string, std::int64_t> device_buffer_sizes;

  std::deque<Item> to_treat;
  for (auto& item : own_parameters(model, "")) to_treat.push_back(std::move(item));
  for (auto& item : own_children(model, "")) to_treat.push_back(std::move(item));
  for (const auto& name : own_buffers(model, "")) to_treat.push_back({name, nullptr});

  const auto split = [&](const Item& item) {
    std::vector<Item> pieces = own_parameters(*item.module, item.name);
    for (auto& child : own_children(*item.module, item.name)) pieces.push_back(std::move(child));
    if (auto buffers = own_buffers(*item.module, item.name); !buffers.empty())
      split_buffers.emplace_back(item.name, std::move(buffers));
    return pieces;
  };

  std::vector<NamedEntry> first_entries;
  for (const auto& item : to_treat) first_entries.push_back({item.name, item.module});
  LayerSize max_layer = get_max_layer_size(first_entries, sizes, no_split);

  std::size_t current = 0;
  std::int64_t used = 0;
  while (!to_treat.empty()) {
    const Item item = to_treat.front();
    to_treat.pop_front();
    // The largest remaining layer is kept in reserve; recompute it once the
    // current largest ones have all been placed.
    std::erase_if(max_layer.names, [&](const std::string& n) { return is_within(n, item.name); });
    if (max_layer.names.empty()) max_layer = largest_module_layer(to_treat, sizes, no_split);
    const std::int64_t module_size = modeling::size_or_zero(sizes, item.name);

    // Parameters tied to one inside this item from outside it must go with it.
    std::vector<std::string> tied_outside;
    for (const auto& group : tied_groups) {
      const bool any_in =
          std::any_of(group.begin(), group.end(), [&](const auto& n) { return is_within(n, item.name); });
      const bool all_in =
          std::all_of(group.begin(), group.end(), [&](const auto& n) { return is_within(n, item.name); });
      if (!any_in || all_in) continue;
      for (const auto& name : group) {
        if (!is_within(name, item.name)) tied_outside.push_back(name);
      }
    }

    const std::string& device = devices[current];
    const bool bounded = device != "disk";
    std::int64_t capacity = bounded ? budget.at(device) : 0;
    std::int64_t reserved = 0;
    if (std::find(main_devices.begin(), main_devices.end(), device) != main_devices.end()) {
      capacity -= max_layer.size;
      reserved = max_layer.size;
    }
    const auto next_device = [&] {
      device_memory_used[device] = used + reserved;
      ++current;
      to_treat.push_front(item);
      used = 0;
    };

    if (bounded && used + module_size > capacity) {
      // Too big: split it, or go on to the next device with it.
      if (!item.module || modeling::unique_children(*item.module).empty() || is_no_split(*item.module, no_split)) {
        next_device();
      } else {
        const auto pieces = split(item);
        to_treat.insert(to_treat.begin(), pieces.begin(), pieces.end());
        max_layer = largest_module_layer(to_treat, sizes, no_split);
      }
      continue;
    }
    if (tied_outside.empty()) {
      used += module_size;
      device_memory_used[device] = used + reserved;
      placed.emplace_back(item.name, device);
      if (!options.offload_buffers && item.module) device_buffer_sizes[device] += buffer_size(*item.module);
      continue;
    }

    // It fits alone; does it fit with the entries that hold its tied parameters?
    std::vector<Item> tied_items;
    std::vector<std::string> tied_names;
    for (const auto& name : tied_outside) {
      const auto holder = std::find_if(to_treat.begin(), to_treat.end(),
                                       [&](const Item& candidate) { return is_within(name, candidate.name); });
      if (holder == to_treat.end()) continue;  // already placed
      tied_items.push_back(*holder);
      tied_names.push_back(name);
    }
    std::int64_t with_ties = module_size;
    for (std::size_t i = 0; i < tied_items.size(); ++i)
      with_ties += modeling::size_or_zero(sizes, tied_items[i].name) - modeling::size_or_zero(sizes, tied_names[i]);
    if (!bounded || used + with_ties <= capacity) {
      used += with_ties;
      placed.emplace_back(item.name, device);
      for (const auto& tied : tied_items) {
        if (const auto at = find_item(to_treat, tied.name); at != to_treat.end()) to_treat.erase(at);
        placed.emplace_back(tied.name, device);
      }
      if (!options.offload_buffers && item.module) device_buffer_sizes[device] += buffer_size(*item.module);
      continue;
    }
    // Not with them: split the first tied entry that can be split, else the next device.
    bool split_one = false;
    for (const auto& tied : tied_items) {
      if (!tied.module || modeling::unique_children(*tied.module).empty() || is_no_split(*tied.module, no_split))
        continue;
      const auto pieces = split(tied);
      const auto at = find_item(to_treat, tied.name);
      const auto after = to_treat.erase(at);
      to_treat.insert(after, pieces.begin(), pieces.end());
      to_treat.push_front(item);
      max_layer = largest_module_layer(to_treat, sizes, no_split);
      split_one = true;
      break;
    }
    if (!split_one) next_device();
  }

  for (const auto& [module, buffers] : split_buffers) {
    const auto first = std::find_if(placed.begin(), placed.end(),
                                    [&](const auto& e) { return is_within(e.first, module) && e.first != module; });
    if (first == placed.end()) continue;  // the module went whole after all
    const std::string device = first->second;
    for (const auto& buffer : buffers) placed.emplace_back(buffer, device);
  }
  DeviceMap device_map(placed.begin(), placed.end());
  if (options.clean_result) device_map = clean_device_map(std::move(device_map));

  // Buffers of offloaded layers that are meant to stay on a GPU must fit one.
  const std::int64_t offloaded_buffers = device_buffer_sizes["cpu"] + device_buffer_sizes["disk"];
  if (offloaded_buffers > 0 && !options.offload_buffers) {
    bool fits = false;
    for (const auto& gpu : devices) {
      if (is_gpu(gpu) && budget.at(gpu) >= offloaded_buffers + device_memory_used[gpu]) fits = true;
    }
    if (!fits && is_gpu(devices.front())) {
      warn(options, "infer_auto_device_map: the layers offloaded to the CPU or disk have " +
                        std::to_string(offloaded_buffers) +
                        " bytes of buffers, which fit no GPU beside what it holds; set offload_buffers to offload "
                        "them too");
    }
  }
  return device_map;
}

DeviceMap clean_device_map(DeviceMap device_map) {
  // From the top: a module all of whose entries went to one device becomes one
  // entry; otherwise each of its children is looked at in turn.
  std::deque<std::string> modules{""};
  while (!modules.empty()) {
    const std::string module = modules.front();
    modules.pop_front();
    const std::string prefix = module.empty() ? "" : module + ".";
    std::set<std::string> values;
    std::size_t count = 0;
    std::set<std::string> children;
    for (const auto& [name, device] : device_map) {
      if (!starts_with(name, prefix)) continue;
      values.insert(device);
      ++count;
      const auto dot = name.find('.', prefix.size());
      children.insert(name.substr(0, dot));
    }
    if (values.size() == 1 && count > 1) {
      const std::string device = *values.begin();
      std::erase_if(device_map, [&](const auto& entry) { return starts_with(entry.first, prefix); });
      device_map[module] = device;
      continue;
    }
    for (const auto& child : children) {
      if (child != module) modules.push_back(child);
    }
  }
  return device_map;
}

void check_device_map(const Module& model, const DeviceMap& device_map) {
  for (const auto& [name, device] : device_map) {
    if (!is_gpu(device) && device != "cpu" && device != "disk") {
      throw ConfigError(detail::where() + " device map: '" + name + "' goes to '" + device +
                        "'; devices are GPU ordinals (\"0\", \"1\", ...), \"cpu\" and \"disk\"");
    }
  }
  std::vector<std::string> missing;
  for (const auto kind : {modeling::TensorKind::Parameters, modeling::TensorKind::Buffers}) {
    for (const auto& [name, tensor] : modeling::named_tensors(model, kind, /*unique=*/true)) {
      const bool covered = std::any_of(device_map.begin(), device_map.end(),
                                       [&](const auto& entry) { return is_within(name, entry.first); });
      if (!covered) missing.push_back(name);
    }
  }
  if (missing.empty()) return;
  std::string list;
  for (const auto& name : missing) list += (list.empty() ? "" : ", ") + name;
  throw ConfigError(detail::where() + " the device map gives no device for " + std::to_string(missing.size()) +
                    " tensor(s) of the model: " + list + "; add an entry for each, or for a module above it");
}

const std::string& device_of(const DeviceMap& device_map, const std::string& name) {
  const std::string* best = nullptr;
  std::size_t best_length = 0;
  for (const auto& [entry, device] : device_map) {
    if (is_within(name, entry) && (best == nullptr || entry.size() >= best_length)) {
      best = &device;
      best_length = entry.size();
    }
  }
  if (best == nullptr) throw ConfigError(detail::where() + " the device map gives no device for '" + name + "'");
  return *best;
}

}  // namespace accelerate
