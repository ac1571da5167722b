#include "accelerate/modeling/empty_weights.hpp"

#include <c10/core/impl/LocalDispatchKeySet.h>

#include "accelerate/modeling/module_tensors.hpp"
#include "modeling/module_walk.hpp"

namespace accelerate {

void move_to_meta_device(torch::nn::Module& module) {
  for (const auto kind : {modeling::TensorKind::Parameters, modeling::TensorKind::Buffers}) {
    for (const auto& [name, tensor] : modeling::named_tensors(module, kind, /*unique=*/true)) {
      if (!tensor.is_meta()) set_module_tensor_to_device(module, name, c10::kMeta);
    }
  }
}

std::vector<std::string> meta_tensor_names(const torch::nn::Module& module) {
  std::vector<std::string> names;
  for (const auto kind : {modeling::TensorKind::Parameters, modeling::TensorKind::Buffers}) {
    for (const auto& [name, tensor] : modeling::named_tensors(module, kind, /*unique=*/true)) {
      if (tensor.is_meta()) names.push_back(name);
    }
  }
  return names;
}

namespace detail {

void run_on_meta_device(const std::function<void()>& construct) {
  // LibTorch's C++ modules create their tensors in their constructors, on the
  // CPU, and LibTorch has no default device to redirect them (Python's
  // `with torch.device("meta")` is a Python-side mode). The dispatcher is
  // redirected instead: with the Meta key included, a factory (torch::empty,
  // torch::zeros, ...) runs its meta kernel, which allocates nothing; with
  // BackendSelect excluded, the factory's CPU options no longer choose the CPU
  // kernel first. In-place initialisers (uniform_, normal_, fill_) on meta
  // tensors do nothing. The whole thread-local set is restored afterwards:
  // IncludeDispatchKeyGuard would leave the Meta backend bit behind (removing
  // a key removes only its functionality bit), and every later operation on
  // this thread would then run meta kernels.
  auto redirected = c10::impl::tls_local_dispatch_key_set();
  redirected.included_ = redirected.included_ | c10::DispatchKeySet(c10::DispatchKey::Meta);
  redirected.excluded_ = redirected.excluded_ | c10::DispatchKeySet(c10::DispatchKey::BackendSelect);
  const c10::impl::ForceDispatchKeyGuard guard(redirected);
  construct();
}

}  // namespace detail
}  // namespace accelerate
