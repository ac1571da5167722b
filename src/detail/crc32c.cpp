#include "detail/crc32c.hpp"

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
#elif defined(__aarch64__)
#include <arm_acle.h>
#include <arm_neon.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>
#define ACCELERATE_CRC32C_ARM 1
#endif

namespace accelerate::detail {
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

// Folding with carry-less multiplication goes past the one 8-byte crc32
// instruction per cycle: the message is reduced 128 to 256 bytes at a time by
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

// Product of two polynomials modulo the CRC polynomial (reflected order).
constexpr std::uint32_t multiply_mod(std::uint32_t a, std::uint32_t b) noexcept {
  std::uint32_t product = 0;
  for (std::uint32_t mask = 1u << 31; mask != 0; mask >>= 1) {
    if (a & mask) product ^= b;
    b = (b & 1u) ? (b >> 1) ^ kPolynomial : b >> 1;
  }
  return product;
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

// For merging `lanes` accumulators `width` bytes wide: accumulator i moves
// width × (lanes - 1 - i) bytes to meet the last one. Computed at compile time.
template <int lanes, unsigned width>
constexpr std::array<Fold, lanes> merge_folds() {
  std::array<Fold, lanes> folds{};
  for (int i = 0; i + 1 < lanes; ++i) folds[i] = fold_by(width * static_cast<unsigned>(lanes - 1 - i));
  return folds;
}

// x^n mod P by repeated squaring, for exponents too large for x_power's loop
// at compile time.
constexpr std::uint32_t x_power_by_squaring(std::uint64_t n) {
  std::uint32_t result = 1u << 31;  // x^0
  std::uint32_t square = 1u << 30;  // x^1
  for (; n != 0; n >>= 1) {
    if (n & 1u) result = multiply_mod(result, square);
    square = multiply_mod(square, square);
  }
  return result;
}

// Multiplication by a constant is linear, so it is four table look-ups, one
// per byte of the state: cheap enough to join stripes of one KiB.
struct ConstantMultiplier {
  std::array<std::array<std::uint32_t, 256>, 4> table{};
  constexpr explicit ConstantMultiplier(std::uint32_t constant) {
    for (unsigned byte = 0; byte < 4; ++byte)
      for (std::uint32_t value = 0; value < 256; ++value)
        table[byte][value] = multiply_mod(constant, value << (8 * byte));
  }
  constexpr std::uint32_t operator()(std::uint32_t state) const noexcept {
    return table[0][state & 0xFFu] ^ table[1][(state >> 8) & 0xFFu] ^ table[2][(state >> 16) & 0xFFu] ^
           table[3][state >> 24];
  }
};

// The interleaved crc32 kernels run three independent streams, which hides
// the instruction's latency (3 cycles on x86, 2 to 3 on ARM cores; one issue
// a cycle). The update is linear in the state, so the second and third
// streams start from zero and the three join as
//   state(A‖B) = state(A) × x^(8|B|) ⊕ state_from_zero(B),
// a multiplication by a constant per stripe. Stripes are long (32 KiB) while
// the data lasts, which measured 17 GB/s from memory against 9 with 2 KiB
// stripes and prefetching, and short (1 KiB) for the rest.
constexpr std::size_t kLongStripe = 32 * 1024;
constexpr std::size_t kShortStripe = 1024;
constexpr std::size_t kPrefetchDistance = 2048;
template <std::size_t stripe>
constexpr ConstantMultiplier kAcross(x_power_by_squaring(8 * stripe));

// The crc32 instruction of each architecture, 8 bytes and 1 byte at a time.
// On x86 the state stays in a 64-bit register between words, as the
// instruction has it: narrowing it each time cost 7 % in cache.
#if defined(ACCELERATE_CRC32C_X86)
#define ACCELERATE_CRC32C_STREAMS_TARGET __attribute__((target("sse4.2")))
using StreamState = std::uint64_t;
ACCELERATE_CRC32C_STREAMS_TARGET inline StreamState crc_word(StreamState state, std::uint64_t word) noexcept {
  return _mm_crc32_u64(state, word);
}
ACCELERATE_CRC32C_STREAMS_TARGET inline std::uint32_t crc_byte(std::uint32_t state, unsigned char byte) noexcept {
  return _mm_crc32_u8(state, byte);
}
#elif defined(ACCELERATE_CRC32C_ARM)
#define ACCELERATE_CRC32C_STREAMS_TARGET __attribute__((target("+crc")))
using StreamState = std::uint32_t;
ACCELERATE_CRC32C_STREAMS_TARGET inline StreamState crc_word(StreamState state, std::uint64_t word) noexcept {
  return __crc32cd(state, word);
}
ACCELERATE_CRC32C_STREAMS_TARGET inline std::uint32_t crc_byte(std::uint32_t state, unsigned char byte) noexcept {
  return __crc32cb(state, byte);
}
#endif

#ifdef ACCELERATE_CRC32C_STREAMS_TARGET
template <std::size_t stripe>
ACCELERATE_CRC32C_STREAMS_TARGET inline std::uint32_t three_streams(std::uint32_t state, const unsigned char*& p,
                                                                    std::size_t& n) noexcept {
  for (; n >= 3 * stripe; p += 3 * stripe, n -= 3 * stripe) {
    StreamState a = state;
    StreamState b = 0;
    StreamState c = 0;
    for (std::size_t line = 0; line < stripe; line += 64) {
      for (std::size_t k = 0; k < 3; ++k) __builtin_prefetch(p + k * stripe + line + kPrefetchDistance);
      for (std::size_t i = line; i < line + 64; i += 8) {
        std::uint64_t wa, wb, wc;
        std::memcpy(&wa, p + i, 8);
        std::memcpy(&wb, p + stripe + i, 8);
        std::memcpy(&wc, p + 2 * stripe + i, 8);
        a = crc_word(a, wa);
        b = crc_word(b, wb);
        c = crc_word(c, wc);
      }
    }
    constexpr const ConstantMultiplier& across = kAcross<stripe>;
    const auto low = [](StreamState x) { return static_cast<std::uint32_t>(x); };
    state = across(across(low(a)) ^ low(b)) ^ low(c);
  }
  return state;
}

// The crc32 instructions over three streams: the Sse42 and ArmCrc kernels,
// and the tail of every folding kernel.
ACCELERATE_CRC32C_STREAMS_TARGET std::uint32_t update_crc_instruction(std::uint32_t state, const unsigned char* p,
                                                                      std::size_t n) noexcept {
  state = three_streams<kLongStripe>(state, p, n);
  state = three_streams<kShortStripe>(state, p, n);
  StreamState running = state;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    running = crc_word(running, word);
  }
  state = static_cast<std::uint32_t>(running);
  for (; n > 0; --n, ++p) state = crc_byte(state, *p);
  return state;
}
#endif

#ifdef ACCELERATE_CRC32C_X86
bool has_sse42() noexcept {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}

// One 128-bit block and what the folding kernels do with it, per
// architecture; update_fold128() below is written once over these. On x86
// they are VEX-encoded (AVX): legacy SSE after AVX-512 code paid a false
// dependency on the registers' upper halves, 8 GB/s against 14.5 on a Zen 4 core.
#define ACCELERATE_CRC32C_BLOCK_TARGET __attribute__((target("avx,pclmul,sse4.2")))
using Block = __m128i;

ACCELERATE_CRC32C_BLOCK_TARGET inline Block load_block(const unsigned char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
ACCELERATE_CRC32C_BLOCK_TARGET inline Block multiplier_of(Fold fold) {
  return _mm_set_epi64x(static_cast<long long>(fold.high_half), static_cast<long long>(fold.low_half));
}
// fold(x) ^ next: x moved along by the multiplier's distance, onto next.
ACCELERATE_CRC32C_BLOCK_TARGET inline Block fold_block(Block x, Block multiplier, Block next) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, multiplier, 0x00),
                                     _mm_clmulepi64_si128(x, multiplier, 0x11)),
                       next);
}
// The running state enters as the first 32 bits of the message.
ACCELERATE_CRC32C_BLOCK_TARGET inline Block with_state(Block x, std::uint32_t state) {
  return _mm_xor_si128(x, _mm_cvtsi32_si128(static_cast<int>(state)));
}
// The last 16 bytes of a fold go through crc32, which turns them into the running state.
ACCELERATE_CRC32C_BLOCK_TARGET inline std::uint32_t reduce_block(Block x) {
  std::uint64_t s = _mm_crc32_u64(0, static_cast<std::uint64_t>(_mm_cvtsi128_si64(x)));
  s = _mm_crc32_u64(s, static_cast<std::uint64_t>(_mm_extract_epi64(x, 1)));
  return static_cast<std::uint32_t>(s);
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
  if (n < 1024) return update_crc_instruction(state, p, n);
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
  return update_crc_instruction(reduce_block(x), p, n);
}

bool has_folding() noexcept {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
                          __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
  return has;
}

// 128-bit folding (update_fold128) needs PCLMULQDQ, and AVX for the encoding:
// x86 CPUs without VPCLMULQDQ (AMD before Zen 3, Intel before Ice Lake).
bool has_pclmul() noexcept {
  static const bool has =
      __builtin_cpu_supports("avx") && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
  return has;
}

// 256-bit VPCLMULQDQ under AVX2 (VEX encoding), for CPUs that have the
// instruction but not AVX-512: AMD Zen 3, Intel Alder Lake's cores. Eight
// accumulators of two blocks each, 256 bytes per round.
#define ACCELERATE_CRC32C_AVX2_TARGET __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2")))

ACCELERATE_CRC32C_AVX2_TARGET inline __m256i multiplier_256(Fold fold) {
  const auto low = static_cast<long long>(fold.low_half);
  const auto high = static_cast<long long>(fold.high_half);
  return _mm256_set_epi64x(high, low, high, low);
}

ACCELERATE_CRC32C_AVX2_TARGET inline __m256i fold_pair(__m256i x, __m256i multiplier, __m256i next) {
  return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(x, multiplier, 0x00),
                                           _mm256_clmulepi64_epi128(x, multiplier, 0x11)),
                          next);
}

ACCELERATE_CRC32C_AVX2_TARGET inline __m256i load_256(const unsigned char* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

ACCELERATE_CRC32C_AVX2_TARGET std::uint32_t update_avx2_folded(std::uint32_t state, const unsigned char* p,
                                                               std::size_t n) noexcept {
  constexpr int kLanes = 8;
  if (n < 1024) return update_crc_instruction(state, p, n);
  __m256i a[kLanes];
#pragma GCC unroll 8
  for (int i = 0; i < kLanes; ++i) a[i] = load_256(p + 32 * i);
  a[0] = _mm256_xor_si256(a[0], _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(state))));
  p += 32 * kLanes;
  n -= 32 * kLanes;
  constexpr Fold kRound = fold_by(32 * kLanes);
  const __m256i by_round = multiplier_256(kRound);
  for (; n >= 32 * kLanes; p += 32 * kLanes, n -= 32 * kLanes) {
#pragma GCC unroll 8
    for (int i = 0; i < kLanes; ++i) a[i] = fold_pair(a[i], by_round, load_256(p + 32 * i));
  }
  static constexpr auto kMerge = merge_folds<kLanes, 32>();
  __m256i y = a[kLanes - 1];
#pragma GCC unroll 8
  for (int i = kLanes - 2; i >= 0; --i) y = fold_pair(a[i], multiplier_256(kMerge[i]), y);
  constexpr Fold kPair = fold_by(32);
  const __m256i by32 = multiplier_256(kPair);
  for (; n >= 32; p += 32, n -= 32) y = fold_pair(y, by32, load_256(p));
  // The two 128-bit halves into one block, then at most one more block.
  constexpr Fold kBlock = fold_by(16);
  const __m128i by16 = multiplier_of(kBlock);
  __m128i x = fold_block(_mm256_castsi256_si128(y), by16, _mm256_extracti128_si256(y, 1));
  if (n >= 16) {
    x = fold_block(x, by16, load_block(p));
    p += 16;
    n -= 16;
  }
  return update_crc_instruction(reduce_block(x), p, n);
}

bool has_avx2_folding() noexcept {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") && has_pclmul();
  return has;
}
#endif

#ifdef ACCELERATE_CRC32C_ARM
bool has_arm_crc() noexcept {
  static const bool has = (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
  return has;
}

// One 128-bit block for update_fold128(), with PMULL and the crc32c instructions.
#define ACCELERATE_CRC32C_BLOCK_TARGET __attribute__((target("+crc+crypto")))
using Block = uint64x2_t;

ACCELERATE_CRC32C_BLOCK_TARGET inline Block load_block(const unsigned char* p) {
  return vreinterpretq_u64_u8(vld1q_u8(p));
}
ACCELERATE_CRC32C_BLOCK_TARGET inline Block multiplier_of(Fold fold) {
  return vcombine_u64(vcreate_u64(fold.low_half), vcreate_u64(fold.high_half));
}
ACCELERATE_CRC32C_BLOCK_TARGET inline Block fold_block(Block x, Block multiplier, Block next) {
  const poly128_t low =
      vmull_p64(static_cast<poly64_t>(vgetq_lane_u64(x, 0)), static_cast<poly64_t>(vgetq_lane_u64(multiplier, 0)));
  const poly128_t high =
      vmull_p64(static_cast<poly64_t>(vgetq_lane_u64(x, 1)), static_cast<poly64_t>(vgetq_lane_u64(multiplier, 1)));
  return veorq_u64(veorq_u64(vreinterpretq_u64_p128(low), vreinterpretq_u64_p128(high)), next);
}
ACCELERATE_CRC32C_BLOCK_TARGET inline Block with_state(Block x, std::uint32_t state) {
  return veorq_u64(x, vcombine_u64(vcreate_u64(state), vcreate_u64(0)));
}
ACCELERATE_CRC32C_BLOCK_TARGET inline std::uint32_t reduce_block(Block x) {
  return __crc32cd(__crc32cd(0, vgetq_lane_u64(x, 0)), vgetq_lane_u64(x, 1));
}

bool has_pmull() noexcept {
  static const bool has = has_arm_crc() && (getauxval(AT_HWCAP) & HWCAP_PMULL) != 0;
  return has;
}
#endif

#ifdef ACCELERATE_CRC32C_BLOCK_TARGET
// 128-bit folding: the PclmulFold (x86) and PmullFold (aarch64) kernels.
// Eight accumulators cover the multiply's latency; 128 bytes a round.
ACCELERATE_CRC32C_BLOCK_TARGET std::uint32_t update_fold128(std::uint32_t state, const unsigned char* p,
                                                            std::size_t n) noexcept {
  constexpr int kLanes = 8;
  if (n < 512) return update_crc_instruction(state, p, n);
  Block a[kLanes];
#pragma GCC unroll 8
  for (int i = 0; i < kLanes; ++i) a[i] = load_block(p + 16 * i);
  a[0] = with_state(a[0], state);
  p += 16 * kLanes;
  n -= 16 * kLanes;
  constexpr Fold kRound = fold_by(16 * kLanes);
  const Block by_round = multiplier_of(kRound);
  for (; n >= 16 * kLanes; p += 16 * kLanes, n -= 16 * kLanes) {
#pragma GCC unroll 8  // the accumulators stay in registers only when unrolled
    for (int i = 0; i < kLanes; ++i) a[i] = fold_block(a[i], by_round, load_block(p + 16 * i));
  }
  // Each accumulator is folded across the distance to the last one.
  static constexpr auto kMerge = merge_folds<kLanes, 16>();
  Block x = a[kLanes - 1];
#pragma GCC unroll 8
  for (int i = kLanes - 2; i >= 0; --i) x = fold_block(a[i], multiplier_of(kMerge[i]), x);
  constexpr Fold kBlock = fold_by(16);
  const Block by16 = multiplier_of(kBlock);
  for (; n >= 16; p += 16, n -= 16) x = fold_block(x, by16, load_block(p));
  return update_crc_instruction(reduce_block(x), p, n);
}
#endif

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
  if (has_pclmul()) kernels.push_back(Crc32cKernel::PclmulFold);
  if (has_avx2_folding()) kernels.push_back(Crc32cKernel::Avx2Fold);
  if (has_folding()) kernels.push_back(Crc32cKernel::Avx512Fold);
#endif
#ifdef ACCELERATE_CRC32C_ARM
  if (has_arm_crc()) kernels.push_back(Crc32cKernel::ArmCrc);
  if (has_pmull()) kernels.push_back(Crc32cKernel::PmullFold);
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
    case Crc32cKernel::PclmulFold: return "pclmulqdq";
    case Crc32cKernel::Avx2Fold: return "avx2-vpclmulqdq";
    case Crc32cKernel::Avx512Fold: return "avx512-vpclmulqdq";
    case Crc32cKernel::ArmCrc: return "armv8-crc";
    case Crc32cKernel::PmullFold: return "pmull";
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
    case Crc32cKernel::Sse42: return update_crc_instruction(state, bytes, size) ^ 0xFFFFFFFFu;
    case Crc32cKernel::PclmulFold: return update_fold128(state, bytes, size) ^ 0xFFFFFFFFu;
    case Crc32cKernel::Avx2Fold: return update_avx2_folded(state, bytes, size) ^ 0xFFFFFFFFu;
#endif
#ifdef ACCELERATE_CRC32C_ARM
    case Crc32cKernel::ArmCrc: return update_crc_instruction(state, bytes, size) ^ 0xFFFFFFFFu;
    case Crc32cKernel::PmullFold: return update_fold128(state, bytes, size) ^ 0xFFFFFFFFu;
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

}  // namespace accelerate::detail
