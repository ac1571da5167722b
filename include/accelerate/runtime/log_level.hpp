// Log levels, apart from the Logger so that State can carry the configured
// level without including the logger.
#pragma once

#include <string_view>

namespace accelerate {

enum class LogLevel { Debug = 10, Info = 20, Warning = 30, Error = 40 };

/// "debug", "info", "warning" or "error" (lower case, as ACCELERATE_LOG_LEVEL
/// and the configuration file's log_level take them); anything else is a
/// ConfigError naming the value.
LogLevel parse_log_level(std::string_view text);

/// "DEBUG", "INFO", "WARNING" or "ERROR", as records print them.
std::string_view to_string(LogLevel level);

}  // namespace accelerate
