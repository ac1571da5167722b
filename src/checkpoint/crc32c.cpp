#include "checkpoint/crc32c.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstring>
#include <vector>

#if ACCELERATE_CRC32C_ISAL
#include <isa-l/crc.h>
#endif

#if defined(__x86_64__)
#include <immintrin.h>
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
    const std::uint32_t crc_ab = crc32c_combine(static_cast<std::uint32_t>(a) ^ 0xFFFFFFFFu,
                                                static_cast<std::uint32_t>(b) ^ 0xFFFFFFFFu, kStripe);
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

// Folding with carry-less multiplication goes past the one 8-byte crc32
// instruction per cycle: the message is reduced 256 bytes at a time by
// multiplying 128-bit blocks by x^distance mod P, which needs no carry chain
// between blocks, and only the last 16 bytes go through crc32 itself.
//
// In the reflected order a 128-bit block's bit i is the coefficient of
// x^(127-i), so its low 64 bits are the high-degree half. A carry-less
// product of two such halves comes out shifted by one degree, hence the
// exponents T+63 and T-1 below for a fold over T bits.

// x^n mod P in the reflected order (bit 31 is x^0).
constexpr std::uint32_t x_power(unsigned n) {
  std::uint32_t value = 1u << 31;
  for (unsigned i = 0; i < n; ++i) value = (value & 1u) ? (value >> 1) ^ kPolynomial : value >> 1;
  return value;
}

// Multipliers that move a 128-bit block `bytes` bytes further along the message.
struct Fold {
  std::uint64_t low_half;   // for the block's first 8 bytes: x^(T+64), less the product's shift
  std::uint64_t high_half;  // for its last 8 bytes: x^T, less the product's shift
};
constexpr Fold fold_by(unsigned bytes) {
  const unsigned bits = 8 * bytes;
  return {std::uint64_t{x_power(bits + 63)} << 32, std::uint64_t{x_power(bits - 1)} << 32};
}

#define ACCELERATE_CRC32C_FOLD_TARGET __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2")))

ACCELERATE_CRC32C_FOLD_TARGET inline __m512i broadcast(Fold fold) {
  const auto low = static_cast<long long>(fold.low_half);
  const auto high = static_cast<long long>(fold.high_half);
  return _mm512_set_epi64(high, low, high, low, high, low, high, low);
}

// One 128-bit lane (the masked form: GCC 12 warns about the unmasked one's undefined source).
ACCELERATE_CRC32C_FOLD_TARGET inline __m128i lane(__m512i x, int index) {
  switch (index) {
    case 0: return _mm512_maskz_extracti32x4_epi32(0xF, x, 0);
    case 1: return _mm512_maskz_extracti32x4_epi32(0xF, x, 1);
    case 2: return _mm512_maskz_extracti32x4_epi32(0xF, x, 2);
    default: return _mm512_maskz_extracti32x4_epi32(0xF, x, 3);
  }
}

// fold(x) ^ next, in each of the four 128-bit lanes.
ACCELERATE_CRC32C_FOLD_TARGET inline __m512i fold_into(__m512i x, __m512i multiplier, __m512i next) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, multiplier, 0x00),
                                   _mm512_clmulepi64_epi128(x, multiplier, 0x11), next, 0x96);
}

ACCELERATE_CRC32C_FOLD_TARGET inline __m128i fold_lane(__m128i x, Fold fold, __m128i next) {
  const __m128i multiplier =
      _mm_set_epi64x(static_cast<long long>(fold.high_half), static_cast<long long>(fold.low_half));
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, multiplier, 0x00),
                                     _mm_clmulepi64_si128(x, multiplier, 0x11)),
                       next);
}

ACCELERATE_CRC32C_FOLD_TARGET std::uint32_t update_folded(std::uint32_t state, const unsigned char* p,
                                                          std::size_t n) noexcept {
  if (n < 1024) return update_hardware(state, p, n);
  // Four accumulators of four blocks each; the running state enters as the
  // first 32 bits of the message, as it does in the byte-wise algorithm.
  __m512i a0 = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_maskz_set1_epi32(1, static_cast<int>(state)));
  __m512i a1 = _mm512_loadu_si512(p + 64);
  __m512i a2 = _mm512_loadu_si512(p + 128);
  __m512i a3 = _mm512_loadu_si512(p + 192);
  p += 256;
  n -= 256;
  const __m512i by256 = broadcast(fold_by(256));
  for (; n >= 256; p += 256, n -= 256) {
    a0 = fold_into(a0, by256, _mm512_loadu_si512(p));
    a1 = fold_into(a1, by256, _mm512_loadu_si512(p + 64));
    a2 = fold_into(a2, by256, _mm512_loadu_si512(p + 128));
    a3 = fold_into(a3, by256, _mm512_loadu_si512(p + 192));
  }
  // Four accumulators into one, then the remaining whole 64-byte blocks.
  __m512i a = fold_into(a0, broadcast(fold_by(192)), a3);
  a = fold_into(a1, broadcast(fold_by(128)), a);
  a = fold_into(a2, broadcast(fold_by(64)), a);
  const __m512i by64 = broadcast(fold_by(64));
  for (; n >= 64; p += 64, n -= 64) a = fold_into(a, by64, _mm512_loadu_si512(p));
  // Four lanes into one block, which crc32 reduces to the 32-bit state.
  __m128i x = fold_lane(lane(a, 0), fold_by(48), lane(a, 3));
  x = fold_lane(lane(a, 1), fold_by(32), x);
  x = fold_lane(lane(a, 2), fold_by(16), x);
  std::uint64_t s = _mm_crc32_u64(0, static_cast<std::uint64_t>(_mm_cvtsi128_si64(x)));
  s = _mm_crc32_u64(s, static_cast<std::uint64_t>(_mm_extract_epi64(x, 1)));
  return update_hardware(static_cast<std::uint32_t>(s), p, n);
}

bool has_folding() noexcept {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
                          __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
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

#if ACCELERATE_CRC32C_ISAL
// ISA-L takes and returns the running (inverted) state, and an int length.
std::uint32_t update_isal(std::uint32_t state, const unsigned char* p, std::size_t n) noexcept {
  constexpr std::size_t kChunk = std::size_t{1} << 30;
  while (n > 0) {
    const std::size_t take = n < kChunk ? n : kChunk;
    state = crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(take), state);
    p += take;
    n -= take;
  }
  return state;
}
#endif

}  // namespace

std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t length_b) noexcept {
  if (length_b == 0) return crc_a;
  return multiply_mod(x_to_8n(length_b), crc_a) ^ crc_b;
}

std::vector<Crc32cKernel> crc32c_kernels() {
  std::vector<Crc32cKernel> kernels{Crc32cKernel::Portable};
#ifdef ACCELERATE_CRC32C_X86
  if (has_sse42()) kernels.push_back(Crc32cKernel::Sse42);
  if (has_folding()) kernels.push_back(Crc32cKernel::Avx512Fold);
#endif
#if ACCELERATE_CRC32C_ISAL
  kernels.push_back(Crc32cKernel::IsaL);
#endif
  return kernels;
}

Crc32cKernel crc32c_fastest_kernel() {
  static const Crc32cKernel fastest = [] {
    const auto kernels = crc32c_kernels();
    if (kernels.size() == 1) return kernels.front();
    std::vector<unsigned char> sample(256 * 1024);
    for (std::size_t i = 0; i < sample.size(); ++i) sample[i] = static_cast<unsigned char>(i * 2654435761u >> 24);
    Crc32cKernel best = kernels.back();
    double best_seconds = 1e30;
    for (std::size_t k = 1; k < kernels.size(); ++k) {  // the portable table never wins
      double seconds = 1e30;
      for (int round = 0; round < 3; ++round) {  // best of three: the first warms the caches
        const auto start = std::chrono::steady_clock::now();
        volatile std::uint32_t sink = crc32c(kernels[k], sample.data(), sample.size());
        (void)sink;
        seconds = std::min(seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      if (seconds < best_seconds) {
        best_seconds = seconds;
        best = kernels[k];
      }
    }
    return best;
  }();
  return fastest;
}

const char* to_string(Crc32cKernel kernel) noexcept {
  switch (kernel) {
    case Crc32cKernel::Portable: return "portable";
    case Crc32cKernel::Sse42: return "sse4.2";
    case Crc32cKernel::Avx512Fold: return "avx512-vpclmulqdq";
    case Crc32cKernel::IsaL: return "isa-l";
  }
  return "unknown";
}

std::uint32_t crc32c(Crc32cKernel kernel, const void* data, std::size_t size, std::uint32_t crc) noexcept {
  const auto* bytes = static_cast<const unsigned char*>(data);
  const std::uint32_t state = crc ^ 0xFFFFFFFFu;
  switch (kernel) {
#ifdef ACCELERATE_CRC32C_X86
    case Crc32cKernel::Avx512Fold: return update_folded(state, bytes, size) ^ 0xFFFFFFFFu;
    case Crc32cKernel::Sse42: return update_hardware(state, bytes, size) ^ 0xFFFFFFFFu;
#endif
#if ACCELERATE_CRC32C_ISAL
    case Crc32cKernel::IsaL: return update_isal(state, bytes, size) ^ 0xFFFFFFFFu;
#endif
    default: return update_portable(state, bytes, size) ^ 0xFFFFFFFFu;
  }
}

std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc) noexcept {
  static const Crc32cKernel fastest = crc32c_fastest_kernel();
  return crc32c(fastest, data, size, crc);
}

}  // namespace accelerate::checkpoint::detail
