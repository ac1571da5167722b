// The bytes of Hugging Face's safetensors format, read without LibTorch:
// the 8-byte header length, the JSON header and the model.safetensors.index.json
// of sharded exports. Every function here treats its input as untrusted (a file
// from anywhere): sizes and offsets are checked against the file before anything
// is allocated, and every problem is a ConfigError naming the file and the entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace accelerate::checkpoint::detail {

/// Largest JSON header accepted, as Python's safetensors (100 MB).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
/// Largest model.safetensors.index.json accepted.
inline constexpr std::uint64_t kMaxSafetensorsIndexBytes = 100'000'000;

/// One tensor of a safetensors header. Offsets are relative to the end of the header.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  ///< safetensors code: "F32", "BF16", …
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

/// Bytes per element of a safetensors dtype code this library reads; 0 for any other code.
std::size_t safetensors_element_size(std::string_view code);

/// The header length encoded in `first_bytes` (what could be read of the first 8 bytes
/// of `file`, `file_size` bytes long). Throws ConfigError when the file is shorter than
/// 8 bytes, the header is larger than kMaxSafetensorsHeaderBytes or runs past the end.
std::uint64_t safetensors_header_length(std::string_view first_bytes, std::uint64_t file_size, std::string_view file);

/// The tensors of the JSON header `text`, followed in `file` by `data_bytes` bytes of data
/// ("__metadata__" is checked, not returned). Throws ConfigError when the header is not an
/// object of {"dtype", "shape", "data_offsets"} entries, a name appears twice, "__metadata__"
/// is not a map of strings to strings, a dtype is unknown, a dimension is negative, the
/// offsets disagree with shape and dtype or point past the data, or the tensors' byte ranges,
/// sorted by offset, do not tile the data exactly (a gap before, between or after them, or
/// an overlap).
std::vector<SafetensorsEntry> parse_safetensors_header(std::string_view text, std::uint64_t data_bytes,
                                                       std::string_view file);

/// The distinct shard files named by the weight map of an index (text of `file`), sorted.
/// Throws ConfigError when the index is malformed or a shard is not a relative path inside
/// the index's directory (an absolute path, or one with a ".." component).
std::vector<std::string> parse_safetensors_index(std::string_view text, std::string_view file);

}  // namespace accelerate::checkpoint::detail
