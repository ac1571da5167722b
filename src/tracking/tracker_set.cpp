#include "accelerate/tracking/tracker_set.hpp"

#include <algorithm>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/tracking/file_trackers.hpp"
#include "accelerate/tracking/tensorboard_tracker.hpp"

namespace accelerate::tracking {
namespace {

// What get() returns where a tracker does not run: every call does nothing
// (Accelerate's blank GeneralTracker).
class BlankTracker final : public GeneralTracker {
 public:
  explicit BlankTracker(std::string name) : name_(std::move(name)) {}
  [[nodiscard]] std::string name() const override { return name_; }
  void store_init_configuration(const LogValues&) override {}
  void log(const LogValues&, std::optional<std::int64_t>) override {}

 private:
  std::string name_;
};

// What "all" stands for: every built-in tracker this build has.
std::vector<LoggerType> built_in_trackers() {
  std::vector<LoggerType> types = {LoggerType::Csv, LoggerType::JsonLines};
  if (config::has_tensorboard) types.push_back(LoggerType::TensorBoard);
  return types;
}

std::shared_ptr<GeneralTracker> make_built_in(LoggerType type, const std::filesystem::path& logging_dir,
                                              const std::string& project_name) {
  switch (type) {
    case LoggerType::Csv: return std::make_shared<CsvTracker>(logging_dir, project_name);
    case LoggerType::JsonLines: return std::make_shared<JsonLinesTracker>(logging_dir, project_name);
    case LoggerType::TensorBoard: return std::make_shared<TensorBoardTracker>(logging_dir, project_name);
    case LoggerType::All: break;
  }
  throw Error("log_with: 'all' reached the tracker factory unexpanded (a bug).");
}

}  // namespace

TrackerSet::TrackerSet(std::vector<TrackerChoice> choices, bool is_main_process) : is_main_process_(is_main_process) {
  // "all" stands for every built-in tracker; each tracker appears once.
  std::vector<std::string> seen;
  const auto add = [&](TrackerChoice choice, const std::string& name) {
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) return;
    seen.push_back(name);
    choices_.push_back(std::move(choice));
  };
  for (const TrackerChoice& choice : choices) {
    if (const auto* type = std::get_if<LoggerType>(&choice.get())) {
      if (*type == LoggerType::All) {
        for (LoggerType built_in : built_in_trackers()) add(built_in, std::string(to_string(built_in)));
      } else {
        // Named explicitly in a build without it: say so at construction, on every rank.
        if (*type == LoggerType::TensorBoard && !config::has_tensorboard) {
          accelerate::detail::throw_feature_not_built("TensorBoard (protobuf)", "log_with 'tensorboard'",
                                                      "ACCELERATE_WITH_TENSORBOARD");
        }
        add(*type, std::string(to_string(*type)));
      }
    } else {
      const auto& tracker = std::get<std::shared_ptr<GeneralTracker>>(choice.get());
      if (!tracker) throw ConfigError("log_with: a tracker pointer is null.");
      add(choice, tracker->name());
    }
  }
}

std::vector<std::string> TrackerSet::names() const {
  std::vector<std::string> result;
  for (const TrackerChoice& choice : choices_) {
    if (const auto* type = std::get_if<LoggerType>(&choice.get())) {
      result.emplace_back(to_string(*type));
    } else {
      result.push_back(std::get<std::shared_ptr<GeneralTracker>>(choice.get())->name());
    }
  }
  return result;
}

bool TrackerSet::runs_here(const GeneralTracker& tracker) const {
  return is_main_process_ || !tracker.main_process_only();
}

void TrackerSet::init(const std::string& project_name, const std::filesystem::path& logging_dir,
                      const LogValues& config) {
  if (initialised_) {
    throw ConfigError(
        "init_trackers: the trackers were initialised already. Call it once per "
        "run.");
  }
  initialised_ = true;
  for (const TrackerChoice& choice : choices_) {
    std::shared_ptr<GeneralTracker> tracker;
    if (const auto* type = std::get_if<LoggerType>(&choice.get())) {
      // Checked on every process, so a missing directory fails everywhere alike.
      if (logging_dir.empty()) {
        throw ConfigError("init_trackers: the " + std::string(to_string(*type)) +
                          " tracker writes files, and there is no logging directory. Set "
                          "project_config.project_dir (or logging_dir) in AcceleratorOptions.");
      }
      if (!is_main_process_) continue;  // built-in trackers write on the main process only
      tracker = make_built_in(*type, logging_dir, project_name);
    } else {
      tracker = std::get<std::shared_ptr<GeneralTracker>>(choice.get());
      if (!runs_here(*tracker)) continue;
    }
    tracker->store_init_configuration(config);
    active_.push_back(std::move(tracker));
  }
}

void TrackerSet::abandon() {
  active_.clear();
  initialised_ = false;
}

void TrackerSet::log(const LogValues& values, std::optional<std::int64_t> step) {
  if (!initialised_ && !choices_.empty()) {
    // Accelerate drops such values silently; a run that meant to track should learn it at once.
    throw ConfigError(
        "log: the trackers chosen in log_with have not started. Call "
        "init_trackers(project_name) on every process before the first log.");
  }
  for (const auto& tracker : active_) tracker->log(values, step);
}

GeneralTracker& TrackerSet::get(std::string_view name) {
  for (const auto& tracker : active_) {
    if (tracker->name() == name) return *tracker;
  }
  const std::vector<std::string> chosen = names();
  if (std::find(chosen.begin(), chosen.end(), name) != chosen.end()) {
    // Chosen, but not running on this process (or not initialised yet).
    for (const auto& blank : blanks_) {
      if (blank->name() == name) return *blank;
    }
    blanks_.push_back(std::make_shared<BlankTracker>(std::string(name)));
    return *blanks_.back();
  }
  std::string list;
  for (const std::string& n : chosen) list += (list.empty() ? "" : ", ") + n;
  throw ConfigError("get_tracker: no tracker is called '" + std::string(name) +
                    "'. Chosen in log_with: " + (list.empty() ? std::string("none") : list) + ".");
}

void TrackerSet::finish() {
  if (finished_) return;
  finished_ = true;
  for (const auto& tracker : active_) tracker->finish();
}

}  // namespace accelerate::tracking
