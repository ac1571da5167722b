// Experiment trackers (seeds: GeneralTracker, LoggerType, Accelerator.log).
//
// A tracker receives the run's configuration once and then named values per
// step. The Accelerator owns the trackers it is given (`log_with`) and calls
// them on the main process only, unless a tracker says it runs on every
// process. Built in: CsvTracker and JsonLinesTracker (file_trackers.hpp),
// TensorBoardTracker (tensorboard_tracker.hpp).
// Plain C++: no LibTorch, no MPI.
#pragma once

#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace accelerate::tracking {

/// One logged value: a number or a text. Integers stay integers (a step
/// count, a batch size); everything else numeric is a double.
class LogValue {
 public:
  template <std::floating_point T>
  LogValue(T number) : value_(static_cast<double>(number)) {}  // NOLINT(google-explicit-constructor)
  template <std::integral T>
  requires(!std::same_as<T, bool>) LogValue(T number)
      : value_(static_cast<std::int64_t>(number)) {}                // NOLINT(google-explicit-constructor)
  LogValue(bool flag) : value_(static_cast<std::int64_t>(flag)) {}  // NOLINT(google-explicit-constructor)
  LogValue(std::string text) : value_(std::move(text)) {}           // NOLINT(google-explicit-constructor)
  LogValue(const char* text) : value_(std::string(text)) {}         // NOLINT(google-explicit-constructor)

  [[nodiscard]] const std::variant<double, std::int64_t, std::string>& get() const noexcept { return value_; }
  friend bool operator==(const LogValue&, const LogValue&) = default;

 private:
  std::variant<double, std::int64_t, std::string> value_;
};

/// Named values, in name order: what Accelerate's `log(values)` takes.
using LogValues = std::map<std::string, LogValue, std::less<>>;

/// The interface of every tracker (seeds: GeneralTracker). Implement it to
/// send values anywhere; hand an instance to AcceleratorOptions::log_with.
class GeneralTracker {
 public:
  virtual ~GeneralTracker() = default;
  /// The name get_tracker() finds it by ("csv", "jsonl", or your own).
  [[nodiscard]] virtual std::string name() const = 0;
  /// Whether it runs on the main process only (the default, as in
  /// Accelerate) or on every process.
  [[nodiscard]] virtual bool main_process_only() const { return true; }
  /// The run's hyper-parameters, once, from init_trackers.
  virtual void store_init_configuration(const LogValues& config) = 0;
  /// Values of one step; `step` is absent when the caller gave none.
  virtual void log(const LogValues& values, std::optional<std::int64_t> step) = 0;
  /// A histogram of `values` under `tag` in `bins` buckets. Trackers that
  /// draw no histograms (the CSV and JSON-lines ones) ignore it.
  virtual void log_histogram(const std::string& tag, std::span<const double> values, std::optional<std::int64_t> step,
                             int bins = 30) {
    (void)tag, (void)values, (void)step, (void)bins;
  }
  /// The end of the run (end_training): flush and close.
  virtual void finish() {}
};

/// The built-in trackers (seeds: LoggerType). `All` is every built-in one
/// this build has (TensorBoard only with the TensorBoard feature).
enum class LoggerType { All, Csv, JsonLines, TensorBoard };

/// "all", "csv", "jsonl", "tensorboard" (any case; "json_lines" too) →
/// LoggerType; ConfigError naming the accepted names otherwise.
LoggerType parse_logger_type(std::string_view name);
/// "all", "csv", "jsonl", "tensorboard".
std::string_view to_string(LoggerType type);

/// One entry of AcceleratorOptions::log_with: a built-in tracker by type or
/// name, or a tracker object of your own.
class TrackerChoice {
 public:
  TrackerChoice(LoggerType type) : choice_(type) {}                           // NOLINT(google-explicit-constructor)
  TrackerChoice(std::string_view name) : choice_(parse_logger_type(name)) {}  // NOLINT(google-explicit-constructor)
  TrackerChoice(const char* name) : TrackerChoice(std::string_view(name)) {}  // NOLINT(google-explicit-constructor)
  template <std::derived_from<GeneralTracker> T>
  TrackerChoice(std::shared_ptr<T> tracker)  // NOLINT(google-explicit-constructor)
      : choice_(std::shared_ptr<GeneralTracker>(std::move(tracker))) {}

  [[nodiscard]] const std::variant<LoggerType, std::shared_ptr<GeneralTracker>>& get() const noexcept {
    return choice_;
  }

 private:
  std::variant<LoggerType, std::shared_ptr<GeneralTracker>> choice_;
};

}  // namespace accelerate::tracking
