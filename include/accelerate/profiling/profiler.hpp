// Profiling a run with LibTorch's profiler (seeds: ProfileKwargs,
// Accelerator.profile()).
//
//   auto profiler = accelerator.profile();      // options from AcceleratorOptions::profile_kwargs
//   for (auto& batch : *loader) {
//     ...
//     profiler.step();                           // moves the schedule on
//   }
//   profiler.stop();                             // or let it go out of scope
//
// Every rank records its own trace and writes it as a Chrome trace
// (chrome://tracing, Perfetto) to <output_trace_dir>/trace_rank<r>.json.
// Besides LibTorch's operators, the trace shows the library's own work as
// named ranges: "accelerate::all_reduce" and the other collectives,
// "accelerate::bucket_all_reduce", "accelerate::synchronize_gradients",
// "accelerate::data_loader_next", "accelerate::save_state",
// "accelerate::load_state". docs/profiling.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace accelerate {

/// When to record (seeds: schedule_option, torch.profiler.schedule): after
/// `skip_first` steps, cycles of `wait` idle steps, `warmup` steps that
/// start the profiler without keeping events, and `active` recorded steps,
/// after which the cycle's trace is ready. `repeat` cycles, 0 for as many
/// as the run has.
struct ProfileSchedule {
  int wait = 0;
  int warmup = 0;
  int active = 1;
  int repeat = 0;
  int skip_first = 0;
};

/// One finished recording, handed to ProfileKwargs::on_trace_ready.
class ProfileTrace {
 public:
  virtual ~ProfileTrace() = default;
  /// Writes this recording as a Chrome trace (JSON) to `path`.
  virtual void export_chrome_trace(const std::filesystem::path& path) const = 0;
  /// 0 for the first recording of this profiler, 1 for the next, …
  [[nodiscard]] virtual int cycle() const = 0;
};

/// The seeds' ProfileKwargs.
struct ProfileKwargs {
  /// "cpu" and/or "cuda". Empty: "cpu", and "cuda" too when the
  /// Accelerator's device is a GPU. "cuda" without one is a ConfigError.
  std::vector<std::string> activities;
  /// Unset: record from profile() to stop(), one trace.
  std::optional<ProfileSchedule> schedule_option;
  /// Called on every rank with each finished recording, after it was
  /// written to output_trace_dir (if set).
  std::function<void(const ProfileTrace&)> on_trace_ready;
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = false;
  bool with_flops = false;
  bool with_modules = false;
  /// Where each rank writes trace_rank<r>.json (later cycles
  /// trace_rank<r>.<cycle>.json); created if missing. Empty: no file.
  std::string output_trace_dir;
};

/// A running profiler. Not copyable or movable: hold it as
/// `auto profiler = accelerator.profile();`. One per process at a time
/// (LibTorch has one profiler state); a second is a ConfigError.
class Profiler {
 public:
  /// Starts profiling now (or at the schedule's first active step).
  /// `process_index` names the trace files; `cuda` says whether the
  /// device is a GPU. ConfigError for an unknown activity, "cuda" without
  /// a GPU, a bad schedule, or another profiler running.
  Profiler(ProfileKwargs options, int process_index, bool cuda);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// The end of one training step: moves the schedule on, finishing a
  /// recording when its active steps are done.
  void step();
  /// Finishes a recording in progress (its trace is written) and stops.
  /// Later calls do nothing; the destructor calls it.
  void stop();

  /// Steps taken so far.
  [[nodiscard]] std::int64_t step_number() const noexcept { return step_; }
  /// The trace files written so far, in order.
  [[nodiscard]] const std::vector<std::filesystem::path>& trace_files() const noexcept { return files_; }

 private:
  enum class Phase { Idle, Warmup, Record, RecordAndSave };
  struct StepRange;
  [[nodiscard]] Phase phase_at(std::int64_t step) const;
  void enter(Phase phase);
  void finish_recording();

  ProfileKwargs options_;
  int process_index_;
  bool cuda_;
  std::int64_t step_ = 0;
  Phase phase_ = Phase::Idle;
  bool prepared_ = false;
  bool recording_ = false;
  bool stopped_ = false;
  int cycle_ = 0;
  std::vector<std::filesystem::path> files_;
  std::unique_ptr<StepRange> step_range_;  // the current step's, while recording
};

}  // namespace accelerate
