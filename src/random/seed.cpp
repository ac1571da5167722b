#include "accelerate/random/seed.hpp"

#include <ATen/Context.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "accelerate/error.hpp"
#include "accelerate/runtime/environment.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate {

namespace {

// cuBLAS picks reproducible reduction orders only with a fixed workspace
// configuration; ":4096:8" is the one NVIDIA documents (":16:8" also works,
// more slowly), and a value the user set is kept.
constexpr const char* kCublasWorkspaceVariable = "CUBLAS_WORKSPACE_CONFIG";
constexpr const char* kCublasWorkspaceValue = ":4096:8";

// The last seed given to set_seed; "never" is a separate flag so that every
// 64-bit value stays a valid seed.
std::atomic<bool> seeded{false};
std::atomic<std::uint64_t> last_seed{0};

}  // namespace

std::optional<std::uint64_t> base_seed() noexcept {
  if (!seeded.load()) return std::nullopt;
  return last_seed.load();
}

void set_seed(std::uint64_t seed, bool device_specific, bool deterministic, const State* state) {
  if (device_specific) {
    if (state == nullptr) {
      throw ConfigError(
          "set_seed: device_specific = true adds the rank to the seed and needs the State; pass it "
          "as the fourth argument.");
    }
  }
  last_seed.store(seed);
  seeded.store(true);
  if (device_specific) seed += static_cast<std::uint64_t>(state->process_index());
  // The CPU generator and, when LibTorch has CUDA, every GPU's generator.
  at::manual_seed(seed);
  std::srand(static_cast<unsigned>(seed));
  if (deterministic) {
    if (!get_env(kCublasWorkspaceVariable).has_value()) {
      ::setenv(kCublasWorkspaceVariable, kCublasWorkspaceValue, /*overwrite=*/0);
    }
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setBenchmarkCuDNN(false);
  }
}

}  // namespace accelerate
