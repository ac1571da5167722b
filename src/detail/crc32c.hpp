// CRC-32C (Castagnoli) of byte ranges, and the combination rule that lets
// every rank checksum only its own share of a dataset: the checksum of a
// concatenation A‖B is crc32c_combine(crc(A), crc(B), len(B)). The value
// therefore does not depend on how many ranks wrote or read the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace accelerate::detail {

/// CRC-32C of `size` bytes, continuing from `crc` (0 for a fresh checksum),
/// with the fastest kernel on this CPU (crc32c_fastest_kernel).
std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc = 0) noexcept;

/// Ways of computing the same checksum.
enum class Crc32cKernel {
  Portable,    // a table, one byte at a time
  Sse42,       // the crc32 instruction, three interleaved streams (SSE4.2)
  PclmulFold,  // 128-bit carry-less folding (PCLMULQDQ, VEX-encoded: needs AVX), crc32 for the last bytes
  Avx2Fold,    // 256-bit carry-less folding (VPCLMULQDQ under AVX2), crc32 for the last bytes
  Avx512Fold,  // 512-bit carry-less folding (VPCLMULQDQ), crc32 for the last bytes
  ArmCrc,      // aarch64: the crc32c instructions, three interleaved streams
  PmullFold,   // aarch64: 128-bit carry-less folding (PMULL), crc32c for the last bytes
  IsaL,        // ISA-L's crc32_iscsi, which picks its own code for the CPU (x86 and aarch64)
};

/// The kernels this build can run on this CPU, Portable first.
std::vector<Crc32cKernel> crc32c_kernels();

/// The kernel crc32c() uses: on first use every kernel but the portable
/// one is timed on the same 256 KiB and the fastest kept, since which wins
/// depends on the CPU (ISA-L against our folding on AVX-512, for one).
Crc32cKernel crc32c_fastest_kernel();
const char* to_string(Crc32cKernel kernel) noexcept;

/// CRC-32C with a given kernel, which must be one of crc32c_kernels().
std::uint32_t crc32c(Crc32cKernel kernel, const void* data, std::size_t size, std::uint32_t crc = 0) noexcept;

/// CRC-32C of A‖B from crc(A), crc(B) and the length of B in bytes.
std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t length_b) noexcept;

}  // namespace accelerate::detail
