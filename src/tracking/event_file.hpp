// A TensorBoard event file: TFRecord framing around serialized Event
// messages. Each record is
//
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes
//   | length bytes of data | uint32 masked CRC-32C of the data
//
// where masking rotates the CRC right by 15 bits and adds 0xa282ead8, so a
// CRC of bytes that hold CRCs does not come out trivially. TensorBoard's
// reader checks both checksums and stops at the first that is wrong.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace accelerate::tracking::detail {

/// The masked CRC-32C of TFRecord framing.
std::uint32_t masked_crc32c(const void* data, std::size_t size) noexcept;

/// One TFRecord of `data`, framing included.
std::string tfrecord(std::string_view data);

class EventFile {
 public:
  /// Creates a new file events.out.tfevents.<seconds>.<host>.<pid>.<n> in
  /// `directory` (TensorBoard reads every file whose name holds
  /// "tfevents"; n keeps two trackers of one process apart).
  /// ConfigError naming the path when it cannot be created.
  explicit EventFile(const std::filesystem::path& directory);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  /// Appends one record holding `data` and flushes it, so that a run that
  /// dies keeps every event written. ConfigError after close() or when
  /// the write fails.
  void append(std::string_view data);
  void close();
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace accelerate::tracking::detail
