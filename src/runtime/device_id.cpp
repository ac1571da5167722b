#include "accelerate/runtime/device_id.hpp"

#include <charconv>
#include <ostream>

#include "accelerate/error.hpp"

namespace accelerate {
namespace {

[[noreturn]] void bad_device(std::string_view text, std::string_view why) {
  throw ConfigError("device '" + std::string(text) + "': " + std::string(why) +
                    ". Name the CPU as \"cpu\" and a GPU as \"cuda\" (device 0) or \"cuda:N\".");
}

}  // namespace

DeviceId::DeviceId(std::string_view text) {
  if (text == "cpu") return;
  constexpr std::string_view cuda_prefix = "cuda";
  if (text.substr(0, cuda_prefix.size()) != cuda_prefix)
    bad_device(text, "not a device this library places tensors on");
  kind_ = Kind::Cuda;
  index_ = 0;
  std::string_view rest = text.substr(cuda_prefix.size());
  if (rest.empty()) return;
  if (rest.front() != ':' || rest.size() == 1) bad_device(text, "expected ':' and a device number after \"cuda\"");
  rest.remove_prefix(1);
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), index_);
  if (error != std::errc() || end != rest.data() + rest.size() || index_ < 0) {
    bad_device(text, "the device number is not a non-negative integer");
  }
}

DeviceId DeviceId::cuda(int index) {
  if (index < 0) bad_device("cuda:" + std::to_string(index), "the device number is negative");
  return {Kind::Cuda, index};
}

std::string DeviceId::str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index_); }

std::ostream& operator<<(std::ostream& out, const DeviceId& device) { return out << device.str(); }

}  // namespace accelerate
