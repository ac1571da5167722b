#include "accelerate/modeling/load_checkpoint.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <set>

#include "accelerate/checkpoint/safetensors.hpp"
#include "accelerate/error.hpp"
#include "accelerate/modeling/module_tensors.hpp"
#include "accelerate/modeling/offload.hpp"
#include "modeling/module_walk.hpp"

namespace accelerate {
namespace {

[[noreturn]] void load_error(const std::string& what) { throw ConfigError("load_checkpoint_in_model: " + what); }

c10::Device torch_device(const std::string& device) {
  if (device == "cpu") return c10::Device(c10::kCPU);
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(std::stoi(device)));  // a checked GPU ordinal
}

}  // namespace

checkpoint::KeyReport load_checkpoint_in_model(torch::nn::Module& model, const std::filesystem::path& checkpoint,
                                               const LoadCheckpointOptions& options) {
  // The model's tensors under their first names (a tied weight once), and where they are.
  std::map<std::string, at::Tensor> expected;
  // Every name a tensor is registered under -> its first name: a file may
  // hold a tied weight under any of its names (save_model keeps the first,
  // safetensors' own save_model the alphabetically first, older files all),
  // and loading one of them fills the tensor behind every name.
  std::map<std::string, std::string> first_name_of;
  for (const auto kind : {modeling::TensorKind::Parameters, modeling::TensorKind::Buffers}) {
    std::map<const c10::TensorImpl*, std::string> first;
    for (const auto& [name, tensor] : modeling::named_tensors(model, kind, /*unique=*/true)) {
      expected.emplace(name, tensor);
      first.emplace(tensor.unsafeGetTensorImpl(), name);
    }
    for (const auto& [name, tensor] : modeling::named_tensors(model, kind, /*unique=*/false)) {
      if (const auto found = first.find(tensor.unsafeGetTensorImpl()); found != first.end())
        first_name_of.emplace(name, found->second);
    }
  }
  if (options.device_map) {
    check_device_map(model, *options.device_map);
    const bool to_disk = std::any_of(options.device_map->begin(), options.device_map->end(),
                                     [](const auto& entry) { return entry.second == "disk"; });
    if (to_disk && !options.offload_folder) {
      load_error("the device map sends tensors to the disk; give an offload_folder for them");
    }
  }
  if (options.offload_folder) std::filesystem::create_directories(*options.offload_folder);

  checkpoint::KeyReport report;
  std::set<std::string> loaded;
  OffloadIndex offloaded;
  checkpoint::for_each_model_tensor(checkpoint, [&](const std::string& file_name, const at::Tensor& tensor) {
    const auto known = first_name_of.find(file_name);
    if (known == first_name_of.end()) {
      report.unexpected.push_back(file_name);
      return;
    }
    const std::string& name = known->second;
    if (loaded.count(name) != 0) return;  // another name of a tensor loaded already
    at::Tensor value = tensor;
    if (options.dtype && (value.is_floating_point() || value.is_complex())) value = value.to(*options.dtype);
    const std::string device = options.device_map ? device_of(*options.device_map, name) : std::string();
    const at::Tensor& current = expected.at(name);
    if (device == "disk") {
      // Written in the dtype the model's tensor takes, which then maps the
      // file: the values stay reachable, the memory goes to the page cache.
      if (!options.dtype || !(value.is_floating_point() || value.is_complex())) value = value.to(current.scalar_type());
      if (value.sizes() != current.sizes()) {
        set_module_tensor_to_device(model, name, c10::kCPU, value, options.dtype);  // its shape error
      }
      offload_weight(value, name, *options.offload_folder, &offloaded);
      const at::Tensor mapped = map_offloaded_weight(*options.offload_folder / (name + ".dat"), offloaded.at(name));
      set_module_tensor_to_device(model, name, c10::kCPU, mapped, value.scalar_type());
    } else {
      // Without a map entry a tensor stays on its device; one on the meta
      // device (a model built by init_empty_weights) comes to the CPU.
      const c10::Device target = !device.empty()     ? torch_device(device)
                                 : current.is_meta() ? c10::Device(c10::kCPU)
                                                     : current.device();
      set_module_tensor_to_device(model, name, target, value, options.dtype);
    }
    loaded.insert(name);
  });
  if (options.offload_folder) save_offload_index(offloaded, *options.offload_folder);
  for (const auto& [name, tensor] : expected) {
    if (loaded.count(name) == 0) report.missing.push_back(name);
  }
  if (options.strict && !report.empty()) {
    load_error("'" + checkpoint.string() + "' does not match the model (strict loading):\n" + report.to_string() +
               "Load with strict = false to load the matching tensors only.");
  }
  return report;
}

}  // namespace accelerate
