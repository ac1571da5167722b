// accelerate::DeviceId — where a rank computes: the CPU or one CUDA device.
//
// A plain value of the runtime layer, free of LibTorch, so that the parts
// which only decide placement (State, NUMA affinity, the process groups,
// Kokkos) never parse "cuda:3" again. LibTorch code converts it with
// accelerate::torch_device (runtime/torch_device.hpp).
//
// Like c10::Device it converts implicitly from its text ("cpu", "cuda",
// "cuda:N"), so a placement can still be written as {2, 1, "cpu"}.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace accelerate {

class DeviceId {
 public:
  enum class Kind : std::uint8_t { Cpu, Cuda };

  /// The CPU.
  constexpr DeviceId() noexcept = default;
  /// Parses "cpu", "cuda" (device 0) or "cuda:N"; ConfigError naming the text otherwise.
  DeviceId(std::string_view text);  // NOLINT(google-explicit-constructor): as c10::Device
  DeviceId(const char* text) : DeviceId(std::string_view(text)) {}         // NOLINT(google-explicit-constructor)
  DeviceId(const std::string& text) : DeviceId(std::string_view(text)) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] static constexpr DeviceId cpu() noexcept { return {}; }
  /// CUDA device `index` (ConfigError when negative).
  [[nodiscard]] static DeviceId cuda(int index);

  [[nodiscard]] constexpr Kind kind() const noexcept { return kind_; }
  /// The CUDA ordinal; -1 for the CPU.
  [[nodiscard]] constexpr int index() const noexcept { return index_; }
  [[nodiscard]] constexpr bool is_cpu() const noexcept { return kind_ == Kind::Cpu; }
  [[nodiscard]] constexpr bool is_cuda() const noexcept { return kind_ == Kind::Cuda; }
  /// "cpu" or "cuda:N", the text parse() reads back.
  [[nodiscard]] std::string str() const;

  friend constexpr bool operator==(const DeviceId&, const DeviceId&) noexcept = default;

 private:
  constexpr DeviceId(Kind kind, int index) noexcept : kind_(kind), index_(index) {}

  Kind kind_ = Kind::Cpu;
  int index_ = -1;
};

/// Writes str().
std::ostream& operator<<(std::ostream& out, const DeviceId& device);

}  // namespace accelerate
