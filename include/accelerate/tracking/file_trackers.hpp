// The built-in trackers: plain files any tool reads, written on the main
// process into <logging_dir>/<project_name>/ and flushed after every call,
// so a run that dies keeps everything it logged. A resumed run appends.
//
//   CsvTracker        metrics.csv   wall_time,step,name,value  (one row per value)
//                     config.csv    name,value
//   JsonLinesTracker  metrics.jsonl {"wall_time":…,"step":…,"values":{…}}  (one line per call)
//                     config.json   {"name": value, …}
//
// docs/tracking.md gives the formats and how to read them.
#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "accelerate/tracking/tracker.hpp"

namespace accelerate::tracking {

/// What both file trackers share: the run's directory and the metrics file
/// they append to, flushed after every call.
class FileTracker : public GeneralTracker {
 public:
  ~FileTracker() override;
  FileTracker(const FileTracker&) = delete;
  FileTracker& operator=(const FileTracker&) = delete;

  void finish() override;
  [[nodiscard]] std::string name() const override { return kind_; }
  [[nodiscard]] const std::filesystem::path& directory() const noexcept { return directory_; }

 protected:
  /// Creates <logging_dir>/<project_name>/ and opens `metrics_file` there
  /// for appending (`header` starts a new file). ConfigError when the
  /// directory or the file cannot be made, naming the path.
  FileTracker(std::string kind, const std::filesystem::path& logging_dir, const std::string& project_name,
              const std::string& metrics_file, const std::string& header);
  /// Appends to the metrics file and flushes.
  void append(const std::string& text);
  /// Replaces <directory>/<file> with `text` (the configuration).
  void replace(const std::string& file, const std::string& text);

 private:
  std::string kind_;
  std::filesystem::path directory_;
  std::filesystem::path metrics_path_;
  std::FILE* metrics_ = nullptr;
};

/// "csv": one row per logged value ("long" format: the set of names may
/// change from step to step). Text fields are quoted as RFC 4180 says;
/// numbers are written with enough digits to read back the same double.
class CsvTracker final : public FileTracker {
 public:
  CsvTracker(const std::filesystem::path& logging_dir, const std::string& project_name);
  void store_init_configuration(const LogValues& config) override;
  void log(const LogValues& values, std::optional<std::int64_t> step) override;
};

/// "jsonl": one JSON object per call. JSON has no NaN or infinity: those
/// values are written as the strings "NaN", "Infinity" and "-Infinity".
class JsonLinesTracker final : public FileTracker {
 public:
  JsonLinesTracker(const std::filesystem::path& logging_dir, const std::string& project_name);
  void store_init_configuration(const LogValues& config) override;
  void log(const LogValues& values, std::optional<std::int64_t> step) override;
};

}  // namespace accelerate::tracking
