#include "accelerate/error.hpp"

#include <string_view>

#include "accelerate/format.hpp"

#include "detail/ascii.hpp"
#include "detail/host_name.hpp"
#include "detail/mpi_runtime.hpp"

namespace accelerate {
namespace {

// Characters of a short host name as where() prints it (RFC 1123 plus '_',
// which some clusters use). Narrow on purpose: "[1, 2] …" or "[WARN …" is
// message text, not a prefix.
bool is_host_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

bool is_host(std::string_view text) noexcept {
  if (text.empty()) return false;
  for (const char c : text) {
    if (!is_host_char(c)) return false;
  }
  return true;
}

bool is_number(std::string_view text) noexcept {
  if (text.empty()) return false;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// True when `message` opens with "[rank R/N on HOST]" or "[HOST]", followed
// by a space or nothing: where()'s two shapes, this rank's or another's.
bool has_where_prefix(std::string_view message) noexcept {
  if (message.empty() || message.front() != '[') return false;
  const std::size_t close = message.find(']');
  if (close == std::string_view::npos) return false;
  if (close + 1 < message.size() && message[close + 1] != ' ') return false;
  const std::string_view inside = message.substr(1, close - 1);
  constexpr std::string_view kRank = "rank ";
  constexpr std::string_view kOn = " on ";
  if (inside.substr(0, kRank.size()) != kRank) return is_host(inside);
  const std::string_view position = inside.substr(kRank.size());
  const std::size_t slash = position.find('/');
  const std::size_t on = position.find(kOn);
  if (slash == std::string_view::npos || on == std::string_view::npos || on < slash) return false;
  return is_number(position.substr(0, slash)) && is_number(position.substr(slash + 1, on - slash - 1)) &&
         is_host(position.substr(on + kOn.size()));
}

std::string with_where(const std::string& message) {
  if (has_where_prefix(message)) return message;
  try {
    return detail::where() + " " + message;
  } catch (...) {
    // Naming the rank must never cost the error itself.
    return message;
  }
}

}  // namespace

Error::Error(const std::string& message) : std::runtime_error(with_where(message)) {}

}  // namespace accelerate

namespace accelerate::detail {

std::string where() {
  if (const auto position = world_position()) {
    return accelerate::format("[rank {}/{} on {}]", position->rank, position->size, short_hostname());
  }
  return accelerate::format("[{}]", short_hostname());
}

void throw_feature_not_built(std::string_view feature, std::string_view needed_by, std::string_view cmake_option) {
  const std::string variant = ascii_lower(cmake_option.substr(cmake_option.rfind('_') + 1));
  throw FeatureNotBuilt(accelerate::format(
      "{} needs {}, but this build of Accelerate-HPC was configured without it. Rebuild with -D{}=ON (or 'spack "
      "install accelerate-hpc+{}'); 'accelerate-hpc env' lists the features of this build.",
      needed_by, feature, cmake_option, variant));
}

}  // namespace accelerate::detail
