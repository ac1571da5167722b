#include "accelerate/runtime/log_level.hpp"

#include <string>

#include "accelerate/error.hpp"

namespace accelerate {

LogLevel parse_log_level(std::string_view text) {
  if (text == "debug") return LogLevel::Debug;
  if (text == "info") return LogLevel::Info;
  if (text == "warning") return LogLevel::Warning;
  if (text == "error") return LogLevel::Error;
  throw ConfigError("log level '" + std::string(text) +
                    "' is not one of debug, info, warning, error (ACCELERATE_LOG_LEVEL, the configuration file's "
                    "log_level, StateOptions::log_level).");
}

std::string_view to_string(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: return "DEBUG";
    case LogLevel::Info: return "INFO";
    case LogLevel::Warning: return "WARNING";
    case LogLevel::Error: return "ERROR";
  }
  return "?";
}

}  // namespace accelerate
