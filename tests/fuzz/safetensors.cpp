// Fuzz target: a whole .safetensors file as the loader reads it (header
// length, JSON header, tensor table), without LibTorch. Property: a damaged
// file is a ConfigError naming it; an accepted table only points inside the
// file, with sizes that match shape and dtype, and its tensors, sorted by
// offset, tile the data exactly (no gap, no overlap, nothing after the last).
#include <algorithm>
#include <utility>
#include <vector>

#include "checkpoint/safetensors_format.hpp"
#include "harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace detail = accelerate::checkpoint::detail;
  const std::string_view file = accelerate::fuzz::as_text(data, size);
  accelerate::fuzz::expect_clear_errors("fuzz.safetensors", [&] {
    const std::uint64_t length = detail::safetensors_header_length(file.substr(0, 8), size, "fuzz.safetensors");
    const std::uint64_t data_bytes = size - 8 - length;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (const auto& entry : detail::parse_safetensors_header(file.substr(8, length), data_bytes, "fuzz.safetensors")) {
      std::uint64_t bytes = detail::safetensors_element_size(entry.dtype);
      for (const std::int64_t dimension : entry.shape) bytes *= static_cast<std::uint64_t>(dimension);
      if (entry.begin > entry.end || entry.end > data_bytes || entry.end - entry.begin != bytes) {
        accelerate::fuzz::finding("accepted tensor '" + entry.name + "' points outside the data or has the wrong size");
      }
      ranges.emplace_back(entry.begin, entry.end);
    }
    std::sort(ranges.begin(), ranges.end());
    std::uint64_t covered = 0;
    for (const auto& [begin, end] : ranges) {
      if (begin != covered) accelerate::fuzz::finding("accepted tensors leave a gap or overlap in the data");
      covered = end;
    }
    if (covered != data_bytes) accelerate::fuzz::finding("accepted tensors leave data after the last one");
  });
  return 0;
}
