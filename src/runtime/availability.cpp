#include "accelerate/runtime/availability.hpp"

#include <torch/cuda.h>
#include <torch/version.h>

#include <charconv>
#include <vector>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "runtime/device_probe.hpp"

namespace accelerate {
namespace {

std::vector<long> parse_version(std::string_view text) {
  std::vector<long> parts;
  std::size_t position = 0;
  while (position <= text.size()) {
    const std::size_t dot = text.find('.', position);
    const std::string_view part =
        text.substr(position, dot == std::string_view::npos ? std::string_view::npos : dot - position);
    long value = 0;
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), value);
    // Stop at the first non-numeric component ("2.1.0a0+git" compares as 2.1.0).
    if (error != std::errc{} || part.empty()) break;
    parts.push_back(value);
    if (end != part.data() + part.size() || dot == std::string_view::npos) break;
    position = dot + 1;
  }
  if (parts.empty()) {
    throw ConfigError("version '" + std::string(text) +
                      "' is not a dotted version number such as \"2.1\" or \"1.13.0\".");
  }
  return parts;
}

}  // namespace

bool is_cuda_available() { return detail::visible_cuda_devices() > 0; }
bool is_nccl_available() { return config::has_nccl; }
bool is_hdf5_parallel() { return config::has_hdf5; }
bool is_kokkos_available() { return config::has_kokkos; }
bool is_hwloc_available() { return config::has_hwloc; }

bool is_bf16_available() {
  const int gpus = detail::visible_cuda_devices();
  for (int device = 0; device < gpus; ++device) {
    if (detail::cuda_compute_capability_major(device) < 8) return false;
  }
  return true;
}

bool is_cpu_fp16_autocast_available() { return is_torch_version(">=", "2.5"); }

std::string torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

bool compare_versions(std::string_view left, std::string_view operation, std::string_view right) {
  std::vector<long> a = parse_version(left);
  std::vector<long> b = parse_version(right);
  const std::size_t n = std::max(a.size(), b.size());
  a.resize(n, 0);
  b.resize(n, 0);
  if (operation == "<") return a < b;
  if (operation == "<=") return a <= b;
  if (operation == "==") return a == b;
  if (operation == "!=") return a != b;
  if (operation == ">=") return a >= b;
  if (operation == ">") return a > b;
  throw ConfigError("version comparison '" + std::string(operation) + "' is not one of <, <=, ==, !=, >=, >.");
}

bool is_torch_version(std::string_view operation, std::string_view version) {
  return compare_versions(torch_version(), operation, version);
}

}  // namespace accelerate
