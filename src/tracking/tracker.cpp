#include "accelerate/tracking/tracker.hpp"

#include "accelerate/error.hpp"
#include "detail/ascii.hpp"

namespace accelerate::tracking {

LoggerType parse_logger_type(std::string_view name) {
  const std::string word = accelerate::detail::ascii_lower(name);
  if (word == "all") return LoggerType::All;
  if (word == "csv") return LoggerType::Csv;
  if (word == "jsonl" || word == "json_lines") return LoggerType::JsonLines;
  if (word == "tensorboard") return LoggerType::TensorBoard;
  throw ConfigError(
      "log_with: '" + std::string(name) +
      "' is not a built-in tracker. Use one of: all, csv, jsonl, tensorboard; or pass a GeneralTracker of your "
      "own (docs/tracking.md).");
}

std::string_view to_string(LoggerType type) {
  switch (type) {
    case LoggerType::All: return "all";
    case LoggerType::Csv: return "csv";
    case LoggerType::JsonLines: return "jsonl";
    case LoggerType::TensorBoard: return "tensorboard";
  }
  return "unknown";
}

}  // namespace accelerate::tracking
