#include "accelerate/runtime/mixed_precision.hpp"

#include <string>

#include "accelerate/error.hpp"
#include "detail/ascii.hpp"

namespace accelerate {

namespace {

std::string normalised(std::string_view text) { return detail::ascii_lower(detail::trim_blanks(text)); }

}  // namespace

MixedPrecision parse_mixed_precision(std::string_view text) {
  const std::string value = normalised(text);
  if (value == "no") return MixedPrecision::No;
  if (value == "fp16") return MixedPrecision::FP16;
  if (value == "bf16") return MixedPrecision::BF16;
  throw ConfigError("mixed_precision: '" + std::string(text) +
                    "' is not a mixed-precision mode. Use one of \"no\", \"fp16\", \"bf16\" (fp8 is not "
                    "supported).");
}

std::string_view to_string(MixedPrecision mode) noexcept {
  switch (mode) {
    case MixedPrecision::No: return "no";
    case MixedPrecision::FP16: return "fp16";
    case MixedPrecision::BF16: return "bf16";
  }
  return "?";
}

}  // namespace accelerate
