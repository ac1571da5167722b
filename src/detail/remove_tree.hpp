// Recursive removal of a directory tree, like std::filesystem::remove_all,
// without std::filesystem's recursive iterator.
//
// Why not remove_all: the PyPI torch wheels (2.11 seen) link a private copy
// of libstdc++'s <filesystem> into libtorch_cpu.so and export it, so a
// program linked with that LibTorch calls torch's remove_all instead of the
// system's; on a GPU machine that copy jumped to address 0 inside
// recursive_directory_iterator::__erase (docs/gpu.md). glibc's nftw is not
// interposed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <system_error>

namespace accelerate::detail {

/// Removes `path` and, for a directory, everything below it. Symbolic links
/// are removed, never followed. A path that does not exist removes nothing
/// and is not an error. Returns the number of entries removed; on failure
/// sets `error` (entries removed before the failure stay removed).
std::uintmax_t remove_tree(const std::filesystem::path& path, std::error_code& error) noexcept;

/// As above; throws std::filesystem::filesystem_error naming the path.
std::uintmax_t remove_tree(const std::filesystem::path& path);

}  // namespace accelerate::detail
