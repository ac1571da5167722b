#include "tracking/event_file.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "accelerate/error.hpp"
#include "detail/crc32c.hpp"
#include "detail/host_name.hpp"
#include "tracking/run_directory.hpp"

namespace accelerate::tracking::detail {
namespace {

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xffU));
}

}  // namespace

std::uint32_t masked_crc32c(const void* data, std::size_t size) noexcept {
  const std::uint32_t crc = accelerate::detail::crc32c(data, size);
  return ((crc >> 15U) | (crc << 17U)) + 0xa282ead8U;
}

std::string tfrecord(std::string_view data) {
  std::string record;
  record.reserve(data.size() + 16);
  put_le(record, data.size(), 8);
  put_le(record, masked_crc32c(record.data(), 8), 4);
  record.append(data);
  put_le(record, masked_crc32c(data.data(), data.size()), 4);
  return record;
}

EventFile::EventFile(const std::filesystem::path& directory) {
  static std::atomic<int> files_made{0};
  const auto seconds = static_cast<long long>(std::floor(wall_time()));
  path_ = directory / ("events.out.tfevents." + std::to_string(seconds) + "." + accelerate::detail::short_hostname() +
                       "." + std::to_string(::getpid()) + "." + std::to_string(files_made++));
  // "x": a new file; an existing one of that name is another writer's.
  file_ = std::fopen(path_.c_str(), "wbxe");
  if (file_ == nullptr) fail_on_file("tensorboard", "create", path_, errno);
}

EventFile::~EventFile() { close(); }

void EventFile::close() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
}

void EventFile::append(std::string_view data) {
  if (file_ == nullptr) {
    throw ConfigError("tensorboard tracker: log after finish(); '" + path_.string() +
                      "' is closed. Log before end_training().");
  }
  const std::string record = tfrecord(data);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0) {
    fail_on_file("tensorboard", "write", path_, errno);
  }
}

}  // namespace accelerate::tracking::detail
