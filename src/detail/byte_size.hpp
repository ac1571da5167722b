// The one reading of the sizes users write ("5GB", "1.5GiB", "8Gb", "123"),
// for every option that takes one: `accelerate-hpc convert --max-shard-size`
// and the device maps' `convert_file_size_to_int`. The rules are those of
// Hugging Face Accelerate's convert_file_size_to_int (transformers reads
// max_shard_size alike), widened to T and to a bare B:
//
//   123, 123B       bytes, a whole number
//   5KB … 5TB       powers of ten: 5GB = 5 * 10^9
//   5KiB … 5TiB     powers of two: 5GiB = 5 * 2^30
//   8Kb … 8Tb       bits: a lower-case final b after K, M, G or T, as
//                   Accelerate reads it ("8Gb" and "8gb" are 1GB)
//   1.5GB, .5MiB    decimals, with any unit but bytes; rounded down to a byte
//
// Letters are otherwise case-insensitive. No sign, exponent or blank.
// Decimals are multiplied exactly: "2.01GB" is 2'010'000'000 bytes, where
// Accelerate's float product loses one.
//
// Header-only: the CLI's argument parser is also compiled without the library,
// into the LibTorch-free fuzz harnesses (tests/fuzz), and takes this with it.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "accelerate/error.hpp"
#include "detail/ascii.hpp"

namespace accelerate::detail {

/// A size text as read: its bytes, or why it is not a size.
struct ByteSizeReading {
  std::optional<std::int64_t> bytes;
  /// Set when `bytes` is empty: the text, what is wrong with it and the forms
  /// accepted ("'5XB' is not a size: 'XB' is not a unit. Write …").
  std::string error;
};

namespace byte_size_parts {

struct SizeUnit {
  std::string_view upper_name;
  std::uint64_t bytes;
  bool decimal_prefix;  // K, M, G, T as powers of ten: where a lower-case final b counts bits
};

inline constexpr std::array kSizeUnits{
    SizeUnit{"", 1, false},
    SizeUnit{"B", 1, false},
    SizeUnit{"KB", 1'000, true},
    SizeUnit{"MB", 1'000'000, true},
    SizeUnit{"GB", 1'000'000'000, true},
    SizeUnit{"TB", 1'000'000'000'000, true},
    SizeUnit{"KIB", std::uint64_t{1} << 10, false},
    SizeUnit{"MIB", std::uint64_t{1} << 20, false},
    SizeUnit{"GIB", std::uint64_t{1} << 30, false},
    SizeUnit{"TIB", std::uint64_t{1} << 40, false},
};

inline constexpr std::string_view kAcceptedSizes =
    "Write a whole or decimal number and a unit: none or B (bytes), KB MB GB TB (powers of 10), "
    "KiB MiB GiB TiB (powers of 2), Kb Mb Gb Tb (bits), e.g. 5GB, 1.5GiB, 500MB";

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// floor(0.<digits> * factor), exactly: long multiplication from the last
/// digit, keeping only what carries past the point. The carry stays below
/// `factor` (at most 2^40), so nothing overflows.
inline std::uint64_t fraction_bytes(std::string_view digits, std::uint64_t factor) {
  std::uint64_t carry = 0;
  for (auto digit = digits.rbegin(); digit != digits.rend(); ++digit) {
    carry = (static_cast<std::uint64_t>(*digit - '0') * factor + carry) / 10;
  }
  return carry;
}

}  // namespace byte_size_parts

/// Reads `text` by the rules above; never throws.
inline ByteSizeReading read_byte_size(std::string_view text) {
  using namespace byte_size_parts;
  const auto not_a_size = [text](const std::string& problem) {
    return ByteSizeReading{std::nullopt, "'" + std::string(text) + "' is not a size: " + problem + ". " +
                                             std::string(kAcceptedSizes)};
  };
  const auto digits_from = [text](std::size_t begin) {
    return static_cast<std::size_t>(std::find_if_not(text.begin() + begin, text.end(), is_digit) - text.begin());
  };
  const std::size_t whole_end = digits_from(0);
  const std::string_view whole = text.substr(0, whole_end);
  std::string_view fraction;
  std::size_t number_end = whole_end;
  if (whole_end < text.size() && text[whole_end] == '.') {
    number_end = digits_from(whole_end + 1);
    fraction = text.substr(whole_end + 1, number_end - whole_end - 1);
  }
  if (whole.empty() && fraction.empty()) {
    return not_a_size(text.empty() ? "nothing was given" : "it does not start with a number");
  }

  const std::string_view unit_text = text.substr(number_end);
  const std::string unit = ascii_upper(unit_text);
  const auto found = std::find_if(kSizeUnits.begin(), kSizeUnits.end(),
                                  [&unit](const SizeUnit& candidate) { return candidate.upper_name == unit; });
  if (found == kSizeUnits.end()) return not_a_size("'" + std::string(unit_text) + "' is not a unit");
  const bool decimal_point = number_end > whole_end;
  if (decimal_point && found->bytes == 1) {
    return not_a_size("a number of bytes is whole; a decimal needs a larger unit (1.5KB)");
  }

  const std::string too_large =
      "it is more than " + std::to_string(std::numeric_limits<std::int64_t>::max()) + " bytes";
  std::uint64_t whole_units = 0;
  if (!whole.empty() && std::from_chars(whole.data(), whole.data() + whole.size(), whole_units).ec != std::errc()) {
    return not_a_size(too_large);  // digits only, so the one failure is overflow
  }
  const std::uint64_t fraction_part = fraction_bytes(fraction, found->bytes);
  if (whole_units > (std::numeric_limits<std::uint64_t>::max() - fraction_part) / found->bytes) {
    return not_a_size(too_large);
  }
  std::uint64_t bytes = whole_units * found->bytes + fraction_part;
  if (found->decimal_prefix && text.back() == 'b') bytes /= 8;
  if (bytes > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return not_a_size(too_large);
  return ByteSizeReading{static_cast<std::int64_t>(bytes), {}};
}

/// The bytes of `text`; throws ConfigError "<where>: '<text>' is not a size: …"
/// where `where` names what the text was given for.
inline std::int64_t parse_byte_size(std::string_view text, std::string_view where) {
  const ByteSizeReading size = read_byte_size(text);
  if (!size.bytes) throw ConfigError(std::string(where) + ": " + size.error);
  return *size.bytes;
}

}  // namespace accelerate::detail
