// A rank-aware logger (Accelerate's get_logger / MultiProcessAdapter).
//
// By default a record is emitted by the main process only, so a message
// logged by every rank appears once. `main_process_only = false` emits it
// on every rank with a "[rank r]" prefix; `in_order = true` additionally
// emits rank by rank (collective: every rank must make the call).
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

#include "accelerate/runtime/log_level.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate {

struct LogOptions {
  bool main_process_only = true;
  bool in_order = false;
};

class Logger {
 public:
  /// Level defaults to the State's log_level() (StateOptions::log_level,
  /// ACCELERATE_LOG_LEVEL, the configuration file through the Accelerator,
  /// else Info). Records go to `sink`
  /// (stderr when null), which must outlive the logger.
  Logger(const State& state, std::string name, std::ostream* sink = nullptr);

  void set_level(LogLevel level) noexcept { level_ = level; }
  [[nodiscard]] LogLevel level() const noexcept { return level_; }

  void log(LogLevel level, std::string_view message, LogOptions options = {}) const;
  void debug(std::string_view message, LogOptions options = {}) const { log(LogLevel::Debug, message, options); }
  void info(std::string_view message, LogOptions options = {}) const { log(LogLevel::Info, message, options); }
  void warning(std::string_view message, LogOptions options = {}) const {
    log(LogLevel::Warning, message, options);
  }
  void error(std::string_view message, LogOptions options = {}) const { log(LogLevel::Error, message, options); }

 private:
  void emit(LogLevel level, std::string_view message) const;

  const State& state_;
  std::string name_;
  std::ostream* sink_;
  LogLevel level_ = LogLevel::Info;
};

}  // namespace accelerate
