// Which file a memory address is mapped from, as /proc/self/maps tells:
// for tests of tensors whose memory is a file mapping.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace accelerate::testing {

/// The path of the file whose mapping holds `address` (with " (deleted)"
/// after it once the file was replaced), or "" for memory of no file.
inline std::string mapped_file_of(const void* address) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, permissions, offset, device, inode, path;
    fields >> range >> permissions >> offset >> device >> inode;
    std::getline(fields >> std::ws, path);
    const auto dash = range.find('-');
    const auto begin = std::stoull(range.substr(0, dash), nullptr, 16);
    const auto end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (at >= begin && at < end) return path;
  }
  return {};
}

}  // namespace accelerate::testing
