#include "accelerate/random/rng_state.hpp"

#include <ATen/Context.h>

#include <string>

#include "accelerate/error.hpp"
#include "random/generator_state.hpp"

namespace accelerate {

namespace {

constexpr const char* kTorchKey = "torch_manual_seed";
constexpr const char* kCudaKey = "torch_cuda_manual_seed";
constexpr const char* kGeneratorKey = "generator";

[[noreturn]] void rng_state_error(const std::string& call, const std::string& what) {
  throw ConfigError(call + ": " + what);
}

// Built by appending: GCC 12 reports false -Warray-bounds for chains of
// std::string + literal here.
[[noreturn]] void fail_entry(const char* key, const char* problem) {
  std::string what = "entry '";
  what += key;
  what += "' ";
  what += problem;
  rng_state_error("RngStates::from_ivalue", what);
}

}  // namespace

RngType parse_rng_type(std::string_view name) {
  if (name == "torch") return RngType::Torch;
  if (name == "cuda") return RngType::Cuda;
  if (name == "generator") return RngType::Generator;
  rng_state_error("rng_types",
                  "'" + std::string(name) + "' is not an rng type. Valid: \"torch\", \"cuda\", \"generator\".");
}

std::string_view to_string(RngType type) noexcept {
  switch (type) {
    case RngType::Torch: return "torch";
    case RngType::Cuda: return "cuda";
    case RngType::Generator: return "generator";
  }
  return "?";
}

c10::IValue RngStates::to_ivalue() const {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert(kTorchKey, torch);
  c10::List<at::Tensor> gpus;
  for (const auto& state : cuda) gpus.push_back(state);
  dict.insert(kCudaKey, gpus);
  if (generator.has_value()) dict.insert(kGeneratorKey, *generator);
  return dict;
}

RngStates RngStates::from_ivalue(const c10::IValue& value) {
  const char* call = "RngStates::from_ivalue";
  if (!value.isGenericDict()) rng_state_error(call, std::string("expected a dict, got a ") + value.tagKind() + ".");
  const auto dict = value.toGenericDict();
  RngStates states;
  const auto torch_entry = dict.find(kTorchKey);
  if (torch_entry == dict.end() || !torch_entry->value().isTensor()) {
    fail_entry(kTorchKey, "is missing or not a tensor.");
  }
  states.torch = torch_entry->value().toTensor();
  const auto cuda_entry = dict.find(kCudaKey);
  if (cuda_entry != dict.end()) {
    if (!cuda_entry->value().isTensorList() && !cuda_entry->value().isList()) {
      fail_entry(kCudaKey, "is not a list of tensors.");
    }
    for (const c10::IValue& item : cuda_entry->value().toListRef()) {
      if (!item.isTensor()) fail_entry(kCudaKey, "holds a non-tensor.");
      states.cuda.push_back(item.toTensor());
    }
  }
  const auto generator_entry = dict.find(kGeneratorKey);
  if (generator_entry != dict.end()) {
    if (!generator_entry->value().isTensor()) fail_entry(kGeneratorKey, "is not a tensor.");
    states.generator = generator_entry->value().toTensor();
  }
  return states;
}

RngStates capture_rng_states(const at::Generator* generator) {
  RngStates states;
  states.torch = detail::generator_state(at::globalContext().defaultGenerator(c10::DeviceType::CPU));
  const int gpus = detail::visible_gpus();
  for (int index = 0; index < gpus; ++index)
    states.cuda.push_back(detail::generator_state(detail::cuda_generator(index)));
  if (generator != nullptr) states.generator = detail::generator_state(*generator);
  return states;
}

void restore_rng_states(const RngStates& states, at::Generator* generator) {
  const char* call = "restore_rng_states";
  if (states.generator.has_value() && generator == nullptr) {
    rng_state_error(call, "the states hold a generator state but no generator was passed to restore it into.");
  }
  const int gpus = detail::visible_gpus();
  if (!states.cuda.empty() && static_cast<int>(states.cuda.size()) != gpus) {
    rng_state_error(call,
                    "the states hold " + std::to_string(states.cuda.size()) + " CUDA generator state(s) but " +
                        std::to_string(gpus) +
                        " GPU(s) are visible. Restore with the same GPUs visible (CUDA_VISIBLE_DEVICES), or drop the "
                        "CUDA states.");
  }
  at::Generator cpu = at::globalContext().defaultGenerator(c10::DeviceType::CPU);
  detail::set_generator_state(cpu, states.torch, call);
  for (std::size_t index = 0; index < states.cuda.size(); ++index) {
    at::Generator gpu = detail::cuda_generator(static_cast<int>(index));
    detail::set_generator_state(gpu, states.cuda[index], call);
  }
  if (states.generator.has_value()) detail::set_generator_state(*generator, *states.generator, call);
}

}  // namespace accelerate
