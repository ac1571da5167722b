#include "detail/remove_tree.hpp"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

namespace accelerate::detail {
namespace {

// nftw's callback takes no user pointer: the walk's tallies live per thread.
thread_local std::uintmax_t removed_entries = 0;
thread_local int first_error = 0;

int remove_entry(const char* path, const struct stat* /*status*/, int /*kind*/, struct FTW* /*position*/) {
  if (std::remove(path) != 0) {
    first_error = errno;
    return 1;  // stop the walk
  }
  ++removed_entries;
  return 0;
}

}  // namespace

std::uintmax_t remove_tree(const std::filesystem::path& path, std::error_code& error) noexcept {
  error.clear();
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return 0;
    error.assign(errno, std::generic_category());
    return 0;
  }
  removed_entries = 0;
  first_error = 0;
  // Depth first (children before their directory), without following links.
  const int walked = ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (walked != 0) error.assign(first_error != 0 ? first_error : errno, std::generic_category());
  return removed_entries;
}

std::uintmax_t remove_tree(const std::filesystem::path& path) {
  std::error_code error;
  const std::uintmax_t removed = remove_tree(path, error);
  if (error) throw std::filesystem::filesystem_error("cannot remove the tree", path, error);
  return removed;
}

}  // namespace accelerate::detail
