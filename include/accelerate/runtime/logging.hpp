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
#include <utility>

#include "accelerate/format.hpp"
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
  void warning(std::string_view message, LogOptions options = {}) const { log(LogLevel::Warning, message, options); }
  void error(std::string_view message, LogOptions options = {}) const { log(LogLevel::Error, message, options); }

  /// Formatted records (accelerate/format.hpp): `logger.info("step {} loss {:.4f}", step, loss)`.
  /// The text is formatted only when the level lets the record through. The
  /// format string is checked at compile time; a record with no argument
  /// is taken as it is (its braces are text).
  template <class... Args>
  requires(sizeof...(Args) > 0) void debug(format_string<Args...> text, Args&&... args) const {
    log_formatted(LogLevel::Debug, text, std::forward<Args>(args)...);
  }
  template <class... Args>
  requires(sizeof...(Args) > 0) void info(format_string<Args...> text, Args&&... args) const {
    log_formatted(LogLevel::Info, text, std::forward<Args>(args)...);
  }
  template <class... Args>
  requires(sizeof...(Args) > 0) void warning(format_string<Args...> text, Args&&... args) const {
    log_formatted(LogLevel::Warning, text, std::forward<Args>(args)...);
  }
  template <class... Args>
  requires(sizeof...(Args) > 0) void error(format_string<Args...> text, Args&&... args) const {
    log_formatted(LogLevel::Error, text, std::forward<Args>(args)...);
  }

 private:
  template <class... Args>
  void log_formatted(LogLevel level, format_string<Args...> text, Args&&... args) const {
    // Formatted records are the main process's (LogOptions' default): no
    // other rank pays for the formatting.
    if (level < level_ || !state_.is_main_process()) return;
    log(level, accelerate::format(text, std::forward<Args>(args)...));
  }

  void emit(LogLevel level, std::string_view message) const;

  const State& state_;
  std::string name_;
  std::ostream* sink_;
  LogLevel level_ = LogLevel::Info;
};

}  // namespace accelerate
