#include "accelerate/tracking/file_trackers.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "accelerate/error.hpp"
#include "tracking/run_directory.hpp"

namespace accelerate::tracking {
namespace fs = std::filesystem;

namespace {

using detail::fail_on_file;
using detail::wall_time;

// Shortest text that reads back as the same double (17 significant digits at most).
std::string number_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[32];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

// RFC 4180: a field with a comma, a quote or a line break is quoted, quotes doubled.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string csv_value(const LogValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) {
          return number_text(v);
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          return std::to_string(v);
        } else {
          return csv_field(v);
        }
      },
      value.get());
}

nlohmann::json json_value(const LogValue& value) {
  return std::visit(
      [](const auto& v) -> nlohmann::json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) {
          if (std::isnan(v)) return "NaN";
          if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
        }
        return v;
      },
      value.get());
}

nlohmann::json json_object(const LogValues& values) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [name, value] : values) object[name] = json_value(value);
  return object;
}

std::string dump(const nlohmann::json& json) {
  // Names and text are the caller's: replace invalid UTF-8 instead of throwing mid-run.
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

// ---------------------------------------------------------------- shared

FileTracker::FileTracker(std::string kind, const fs::path& logging_dir, const std::string& project_name,
                         const std::string& metrics_file, const std::string& header)
    : kind_(std::move(kind)),
      directory_(detail::make_run_directory(kind_, logging_dir, project_name)),
      metrics_path_(directory_ / metrics_file) {
  std::error_code missing;
  const bool fresh = fs::file_size(metrics_path_, missing) == 0 || missing;
  metrics_ = std::fopen(metrics_path_.c_str(), "ae");
  if (metrics_ == nullptr) fail_on_file(kind_, "open", metrics_path_, errno);
  if (fresh && !header.empty()) append(header);
}

FileTracker::~FileTracker() { FileTracker::finish(); }

void FileTracker::finish() {
  if (metrics_ != nullptr) std::fclose(metrics_);
  metrics_ = nullptr;
}

void FileTracker::append(const std::string& text) {
  if (metrics_ == nullptr) {
    throw ConfigError(kind_ + " tracker: log after finish(); '" + metrics_path_.string() +
                      "' is closed. Log before end_training().");
  }
  // Flushed at once: a run that dies keeps every value it logged.
  if (std::fputs(text.c_str(), metrics_) < 0 || std::fflush(metrics_) != 0) {
    fail_on_file(kind_, "write", metrics_path_, errno);
  }
}

void FileTracker::replace(const std::string& file, const std::string& text) {
  const fs::path path = directory_ / file;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) fail_on_file(kind_, "write", path, errno);
}

// ---------------------------------------------------------------- CSV

CsvTracker::CsvTracker(const fs::path& logging_dir, const std::string& project_name)
    : FileTracker("csv", logging_dir, project_name, "metrics.csv", "wall_time,step,name,value\n") {}

void CsvTracker::store_init_configuration(const LogValues& config) {
  std::string text = "name,value\n";
  for (const auto& [name, value] : config) text += csv_field(name) + "," + csv_value(value) + "\n";
  replace("config.csv", text);
}

void CsvTracker::log(const LogValues& values, std::optional<std::int64_t> step) {
  const std::string prefix = number_text(wall_time()) + "," + (step ? std::to_string(*step) : std::string()) + ",";
  std::string rows;
  for (const auto& [name, value] : values) rows += prefix + csv_field(name) + "," + csv_value(value) + "\n";
  append(rows);
}

// ---------------------------------------------------------------- JSON lines

JsonLinesTracker::JsonLinesTracker(const fs::path& logging_dir, const std::string& project_name)
    : FileTracker("jsonl", logging_dir, project_name, "metrics.jsonl", "") {}

void JsonLinesTracker::store_init_configuration(const LogValues& config) {
  replace("config.json", dump(json_object(config)) + "\n");
}

void JsonLinesTracker::log(const LogValues& values, std::optional<std::int64_t> step) {
  nlohmann::json line = {{"wall_time", wall_time()}};
  line["step"] = step ? nlohmann::json(*step) : nlohmann::json(nullptr);
  line["values"] = json_object(values);
  append(dump(line) + "\n");
}

}  // namespace accelerate::tracking
