#include "detail/host_name.hpp"

#include <unistd.h>

#include <array>

namespace accelerate::detail {

std::string short_hostname() {
  std::array<char, 256> buffer{};
  if (gethostname(buffer.data(), buffer.size() - 1) != 0) return "unknown-host";
  std::string name(buffer.data());
  return name.substr(0, name.find('.'));
}

}  // namespace accelerate::detail
