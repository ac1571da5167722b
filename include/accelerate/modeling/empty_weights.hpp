// Building a model without memory for its weights (Accelerate's
// init_empty_weights): every tensor the model's constructors create goes on
// the meta device, which records shapes and dtypes and allocates nothing. The
// model's sizes and device map are then computed (compute_module_sizes,
// infer_auto_device_map), and load_checkpoint_in_model gives each tensor its
// memory and values, one tensor at a time.
//
//   auto model = accelerate::init_empty_weights([] { return Transformer(config); });
//   auto map = accelerate::infer_auto_device_map(*model, budget);
//   accelerate::load_checkpoint_in_model(*model, "exported/", {.device_map = map, ...});
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace accelerate {

/// Every parameter and buffer of `module` not on the meta device moves there,
/// in place (its memory, and its gradient's, released once nothing else holds
/// them): the model keeps its shapes and names and gives its memory back.
void move_to_meta_device(torch::nn::Module& module);

/// The names (as named_parameters/named_buffers give them) of the module's
/// tensors still on the meta device: what a load has not filled yet.
std::vector<std::string> meta_tensor_names(const torch::nn::Module& module);

namespace detail {

/// Runs `construct` with this thread's tensor factories sending their tensors
/// to the meta device; the thread's dispatch state is restored afterwards,
/// whether `construct` returns or throws.
void run_on_meta_device(const std::function<void()>& construct);

}  // namespace detail

/// Calls `make()`, which builds and returns a model, with every tensor that
/// the tensor factories (torch::empty, torch::zeros, torch::randn, ...) create
/// on this thread put on the meta device, and returns what it returns: the
/// model's parameters and buffers made there have shapes, dtypes and names
/// and no memory. It is Accelerate's init_empty_weights(include_buffers=True):
/// a LibTorch module's buffers are all persistent (in its state dict), so a
/// checkpoint fills them too. Tensors that do not come from a factory keep
/// their memory: those made from a host scalar (torch::tensor(0), BatchNorm's
/// counter) and those `make` is handed from outside (a pretrained weight, a
/// shared table), which are never emptied behind their owners' backs. While
/// `make` runs, operations on tensors give meta results: it should build the
/// model and nothing else.
template <class Factory>
auto init_empty_weights(Factory&& make) -> std::invoke_result_t<Factory&> {
  std::optional<std::invoke_result_t<Factory&>> built;
  detail::run_on_meta_device([&] { built.emplace(std::invoke(make)); });
  return std::move(*built);
}

}  // namespace accelerate
