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

/// One row per logged value ("long" format: the set of names may change
/// from step to step). Text fields are quoted as RFC 4180 says; numbers are
/// written with enough digits to read back the same double.
class CsvTracker final : public GeneralTracker {
 public:
  /// Creates <logging_dir>/<project_name>/ and opens metrics.csv for
  /// appending (a header is written to a new file). ConfigError when the
  /// directory or the file cannot be made, naming the path.
  CsvTracker(const std::filesystem::path& logging_dir, const std::string& project_name);
  ~CsvTracker() override;

  [[nodiscard]] std::string name() const override { return "csv"; }
  void store_init_configuration(const LogValues& config) override;
  void log(const LogValues& values, std::optional<std::int64_t> step) override;
  void finish() override;
  [[nodiscard]] const std::filesystem::path& directory() const noexcept { return directory_; }

 private:
  std::filesystem::path directory_;
  std::FILE* metrics_ = nullptr;
};

/// One JSON object per call. JSON has no NaN or infinity: those values are
/// written as the strings "NaN", "Infinity" and "-Infinity".
class JsonLinesTracker final : public GeneralTracker {
 public:
  /// As CsvTracker, with metrics.jsonl.
  JsonLinesTracker(const std::filesystem::path& logging_dir, const std::string& project_name);
  ~JsonLinesTracker() override;

  [[nodiscard]] std::string name() const override { return "jsonl"; }
  void store_init_configuration(const LogValues& config) override;
  void log(const LogValues& values, std::optional<std::int64_t> step) override;
  void finish() override;
  [[nodiscard]] const std::filesystem::path& directory() const noexcept { return directory_; }

 private:
  std::filesystem::path directory_;
  std::FILE* metrics_ = nullptr;
};

}  // namespace accelerate::tracking
