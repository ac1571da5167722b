#include "random/generator_state.hpp"

#include <ATen/Context.h>
#include <torch/cuda.h>

#include <mutex>
#include <string>

#include "accelerate/error.hpp"

namespace accelerate::detail {

at::Tensor generator_state(const at::Generator& generator) {
  at::Generator shared = generator;  // same implementation, non-const handle for the lock
  const std::lock_guard<std::mutex> lock(shared.mutex());
  return shared.get_state();
}

void set_generator_state(at::Generator& generator, const at::Tensor& state, const char* call) {
  const at::Tensor current = generator_state(generator);
  if (!state.defined() || state.scalar_type() != at::kByte || state.numel() != current.numel()) {
    const std::string saved =
        state.defined() ? std::to_string(state.numel()) + " × " + std::string(c10::toString(state.scalar_type()))
                        : std::string("undefined");
    throw ConfigError(std::string(call) + ": a generator state of " + saved + " does not fit this generator (" +
                      std::to_string(current.numel()) +
                      " × Byte). Restore into a generator of the kind that was saved.");
  }
  const std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state.contiguous());
}

at::Generator cuda_generator(int index) {
  return at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index)));
}

int visible_gpus() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

}  // namespace accelerate::detail
