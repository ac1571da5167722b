// Activation checkpointing: a submodule's forward recomputed in backward
// instead of keeping its activations (torch.utils.checkpoint.checkpoint; the
// name accelerate::checkpoint is the namespace of saved training state).
//
//   torch::Tensor BlockImpl::forward(torch::Tensor x, const torch::Tensor& mask) {
//     return accelerate::activation_checkpoint(*this, [this, mask](const torch::Tensor& h) {
//       const torch::Tensor a = h + attn_(ln1_(h), mask);
//       return a + mlp_(ln2_(a));
//     }, x);
//   }
//
// The body runs without a graph; backward runs it again with one (the random
// state and autocast of the first run restored, so dropout draws the same
// masks) and takes the gradients of its inputs and of `module`'s parameters
// from it. Those gradients enter the parameters in the outer backward, as if
// the body had run with a graph, so data-parallel and sharded reducers see
// the same gradients at the same point of backward. The cost: the body's
// forward runs twice in a training step.
//
// The body reads tensors that need a gradient only through its arguments or
// through `module`'s parameters; anything else is a ConfigError in backward
// (its gradient would be lost), naming the tensor's shape. Without gradients
// (evaluation, NoGradGuard) the body just runs.
//
// The body is kept (copied) and runs again in backward, after the forward
// that called it has returned: it captures by value (`[this, mask]`, `[=]`),
// never references to the forward's locals or arguments.
//
// The body takes the tensors it is given (as at::Tensor or const at::Tensor&)
// and returns a tensor, a std::vector of tensors or a std::tuple of tensors.
// Inside a FULL_SHARD unit, ShardedUnitScope::checkpoint does this for the
// unit when the model is sharded with activation checkpointing.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}

namespace accelerate {

namespace training_detail {

using CheckpointBody = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

/// The non-template core of activation_checkpoint(): `body` over `inputs`, recomputed in
/// backward, with `module`'s trainable parameters as inputs of the node.
std::vector<at::Tensor> run_checkpointed(const torch::nn::Module& module, CheckpointBody body,
                                         std::vector<at::Tensor> inputs);

template <class T>
struct CheckpointResult {
  static_assert(
      std::is_same_v<T, at::Tensor>,
      "accelerate::activation_checkpoint: the body must return a tensor, a std::vector of tensors or a std::tuple "
      "of tensors");
  static std::vector<at::Tensor> flatten(T&& out) { return {std::move(out)}; }
  static T unflatten(std::vector<at::Tensor>&& flat) { return std::move(flat.front()); }
};

template <>
struct CheckpointResult<std::vector<at::Tensor>> {
  static std::vector<at::Tensor> flatten(std::vector<at::Tensor>&& out) { return std::move(out); }
  static std::vector<at::Tensor> unflatten(std::vector<at::Tensor>&& flat) { return std::move(flat); }
};

template <class... Ts>
struct CheckpointResult<std::tuple<Ts...>> {
  static_assert((std::is_same_v<Ts, at::Tensor> && ...),
                "accelerate::activation_checkpoint: a tuple result holds tensors only");
  static std::vector<at::Tensor> flatten(std::tuple<Ts...>&& out) {
    return std::apply([](auto&... each) { return std::vector<at::Tensor>{std::move(each)...}; }, out);
  }
  static std::tuple<Ts...> unflatten(std::vector<at::Tensor>&& flat) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) { return std::tuple<Ts...>(std::move(flat[I])...); }
    (std::index_sequence_for<Ts...>{});
  }
};

}  // namespace training_detail

/// `fn(inputs...)`, its activations recomputed in backward rather than kept;
/// `module` is the submodule whose parameters `fn` reads (see above).
template <class Fn, class... Tensors>
auto activation_checkpoint(const torch::nn::Module& module, Fn&& fn, const Tensors&... inputs) {
  static_assert((std::is_convertible_v<const Tensors&, const at::Tensor&> && ...),
                "accelerate::activation_checkpoint: the inputs are tensors");
  using Result = std::remove_cvref_t<std::invoke_result_t<Fn&, const Tensors&...>>;
  using Flat = training_detail::CheckpointResult<Result>;
  // A copy: backward runs the body again after this call has returned.
  training_detail::CheckpointBody body = [fn = std::forward<Fn>(fn)](const std::vector<at::Tensor>& in) mutable {
    return [&]<std::size_t... I>(std::index_sequence<I...>) { return Flat::flatten(Result(std::invoke(fn, in[I]...))); }
    (std::index_sequence_for<Tensors...>{});
  };
  return Flat::unflatten(training_detail::run_checkpointed(module, std::move(body), {at::Tensor(inputs)...}));
}

}  // namespace accelerate
