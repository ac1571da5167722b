// FNV-1a, the 64-bit byte hash used for fingerprints that every rank
// computes alike (host identities, argument agreement, job seeds).
#pragma once

#include <cstdint>
#include <string_view>

namespace accelerate::detail {

inline constexpr std::uint64_t kFnv1aBasis = 0xcbf29ce484222325ULL;

/// `hash` continued over `bytes`; chain calls to hash several pieces.
[[nodiscard]] constexpr std::uint64_t fnv1a(std::string_view bytes, std::uint64_t hash = kFnv1aBasis) noexcept {
  for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return hash;
}

}  // namespace accelerate::detail
