// The trackers of one Accelerator (seeds: init_trackers, log, get_tracker,
// end_training): which trackers exist, and on which process each is called.
// No MPI here: the Accelerator makes the ranks agree on failures.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "accelerate/tracking/tracker.hpp"

namespace accelerate::tracking {

class TrackerSet {
 public:
  TrackerSet() = default;
  TrackerSet(std::vector<TrackerChoice> choices, bool is_main_process);

  /// Creates the built-in trackers under <logging_dir>/<project_name>/ and
  /// hands `config` to every tracker that runs on this process. ConfigError
  /// when called twice, when a built-in tracker is chosen and `logging_dir`
  /// is empty (on every process alike), or when a file cannot be made.
  void init(const std::string& project_name, const std::filesystem::path& logging_dir, const LogValues& config);
  /// Drops the trackers init() started, so that init() may be called again:
  /// after init() failed here or on another process.
  void abandon();
  /// Values of one step to every tracker that runs on this process.
  /// ConfigError before init() when trackers were chosen (on every process).
  void log(const LogValues& values, std::optional<std::int64_t> step);
  /// The tracker called `name`. On a process where it does not run (the
  /// main-process-only ones elsewhere), a tracker that ignores every call,
  /// so the same code runs on every rank. ConfigError for a name that was
  /// not chosen, listing the chosen ones.
  [[nodiscard]] GeneralTracker& get(std::string_view name);
  /// finish() of every tracker that runs here (once; later calls do nothing).
  void finish();

  [[nodiscard]] bool initialised() const noexcept { return initialised_; }
  /// The chosen trackers' names, in the order of the choices.
  [[nodiscard]] std::vector<std::string> names() const;

 private:
  [[nodiscard]] bool runs_here(const GeneralTracker& tracker) const;

  std::vector<TrackerChoice> choices_;
  bool is_main_process_ = true;
  bool initialised_ = false;
  bool finished_ = false;
  std::vector<std::shared_ptr<GeneralTracker>> active_;  // called on this process
  std::vector<std::shared_ptr<GeneralTracker>> blanks_;  // stand-ins returned by get()
};

}  // namespace accelerate::tracking
