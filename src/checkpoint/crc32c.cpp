#include "checkpoint/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define ACCELERATE_CRC32C_X86 1
#endif

namespace accelerate::checkpoint::detail {
namespace {

// Reflected Castagnoli polynomial.
constexpr std::uint32_t kPolynomial = 0x82F63B78u;

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t value = i;
    for (int bit = 0; bit < 8; ++bit) value = (value & 1u) ? (value >> 1) ^ kPolynomial : value >> 1;
    table[i] = value;
  }
  return table;
}
constexpr auto kTable = make_table();

std::uint32_t update_portable(std::uint32_t state, const unsigned char* p, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) state = kTable[(state ^ p[i]) & 0xFFu] ^ (state >> 8);
  return state;
}

#ifdef ACCELERATE_CRC32C_X86
// Three independent streams hide the instruction's 3-cycle latency; the
// partial results are merged with the same combination rule as across ranks.
__attribute__((target("sse4.2"))) std::uint32_t update_hardware(std::uint32_t state, const unsigned char* p,
                                                                  std::size_t n) noexcept {
  constexpr std::size_t kStripe = 8192;
  while (n >= 3 * kStripe) {
    std::uint64_t a = state;
    std::uint64_t b = 0xFFFFFFFFu;
    std::uint64_t c = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < kStripe; i += 8) {
      std::uint64_t wa, wb, wc;
      std::memcpy(&wa, p + i, 8);
      std::memcpy(&wb, p + kStripe + i, 8);
      std::memcpy(&wc, p + 2 * kStripe + i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      c = _mm_crc32_u64(c, wc);
    }
    // Finalised CRCs of the three stripes, combined, then back to a running state.
    const std::uint32_t crc_ab =
        crc32c_combine(static_cast<std::uint32_t>(a) ^ 0xFFFFFFFFu, static_cast<std::uint32_t>(b) ^ 0xFFFFFFFFu, kStripe);
    const std::uint32_t crc_abc = crc32c_combine(crc_ab, static_cast<std::uint32_t>(c) ^ 0xFFFFFFFFu, kStripe);
    state = crc_abc ^ 0xFFFFFFFFu;
    p += 3 * kStripe;
    n -= 3 * kStripe;
  }
  std::uint64_t s = state;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    s = _mm_crc32_u64(s, word);
  }
  state = static_cast<std::uint32_t>(s);
  for (; n > 0; --n, ++p) state = _mm_crc32_u8(state, *p);
  return state;
}

bool has_sse42() noexcept {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

// Product of two polynomials modulo the CRC polynomial (reflected order).
std::uint32_t multiply_mod(std::uint32_t a, std::uint32_t b) noexcept {
  std::uint32_t product = 0;
  for (std::uint32_t mask = 1u << 31; mask != 0; mask >>= 1) {
    if (a & mask) product ^= b;
    b = (b & 1u) ? (b >> 1) ^ kPolynomial : b >> 1;
  }
  return product;
}

// x^(2^k) mod P for k = 0..63, so x^(8n) needs at most 64 multiplications.
std::array<std::uint32_t, 64> make_powers() noexcept {
  std::array<std::uint32_t, 64> powers{};
  std::uint32_t value = 1u << 30;  // x^1 in reflected order
  for (auto& power : powers) {
    power = value;
    value = multiply_mod(value, value);
  }
  return powers;
}

std::uint32_t x_to_8n(std::uint64_t n) noexcept {
  static const auto powers = make_powers();
  std::uint32_t result = 1u << 31;  // x^0
  std::uint64_t bits = n;
  int k = 3;  // 8n = n << 3
  while (bits != 0) {
    if (bits & 1u) result = multiply_mod(powers[static_cast<std::size_t>(k)], result);
    bits >>= 1;
    ++k;
  }
  return result;
}

}  // namespace

std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t length_b) noexcept {
  if (length_b == 0) return crc_a;
  return multiply_mod(x_to_8n(length_b), crc_a) ^ crc_b;
}

std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc) noexcept {
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::uint32_t state = crc ^ 0xFFFFFFFFu;
#ifdef ACCELERATE_CRC32C_X86
  if (has_sse42()) return update_hardware(state, bytes, size) ^ 0xFFFFFFFFu;
#endif
  return update_portable(state, bytes, size) ^ 0xFFFFFFFFu;
}

}  // namespace accelerate::checkpoint::detail
