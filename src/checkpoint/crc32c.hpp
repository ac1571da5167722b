// CRC-32C (Castagnoli) of byte ranges, and the combination rule that lets
// every rank checksum only its own share of a dataset: the checksum of a
// concatenation A‖B is crc32c_combine(crc(A), crc(B), len(B)). The value
// therefore does not depend on how many ranks wrote or read the data.
#pragma once

#include <cstddef>
#include <cstdint>

namespace accelerate::checkpoint::detail {

/// CRC-32C of `size` bytes, continuing from `crc` (0 for a fresh checksum).
/// Uses the SSE4.2 instruction when the CPU has it.
std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc = 0) noexcept;

/// CRC-32C of A‖B from crc(A), crc(B) and the length of B in bytes.
std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t length_b) noexcept;

}  // namespace accelerate::checkpoint::detail
