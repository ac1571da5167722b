#include "accelerate/profiling/profiler.hpp"

#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/version.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "accelerate/error.hpp"

namespace accelerate {
namespace {

namespace kineto = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

// LibTorch keeps one profiler state per process.
std::atomic<bool> g_profiler_running{false};

std::set<impl::ActivityType> activities_of(const ProfileKwargs& options, bool cuda) {
  std::set<impl::ActivityType> activities;
  if (options.activities.empty()) {
    activities.insert(impl::ActivityType::CPU);
    if (cuda) activities.insert(impl::ActivityType::CUDA);
    return activities;
  }
  for (const std::string& name : options.activities) {
    if (name == "cpu") {
      activities.insert(impl::ActivityType::CPU);
    } else if (name == "cuda") {
      if (!cuda) {
        throw ConfigError(
            "ProfileKwargs::activities: \"cuda\" was asked for, but this Accelerator runs on the "
            "CPU. Leave activities empty (the device's own) or use \"cpu\".");
      }
      activities.insert(impl::ActivityType::CUDA);
    } else {
      throw ConfigError("ProfileKwargs::activities: '" + name + "' is not an activity. Use \"cpu\" and/or \"cuda\".");
    }
  }
  return activities;
}

void check_schedule(const ProfileSchedule& schedule) {
  if (schedule.wait < 0 || schedule.warmup < 0 || schedule.active < 1 || schedule.repeat < 0 ||
      schedule.skip_first < 0) {
    throw ConfigError("ProfileKwargs::schedule_option {wait " + std::to_string(schedule.wait) + ", warmup " +
                      std::to_string(schedule.warmup) + ", active " + std::to_string(schedule.active) + ", repeat " +
                      std::to_string(schedule.repeat) + ", skip_first " + std::to_string(schedule.skip_first) +
                      "}: active must be at least 1 and the others at least 0.");
  }
}

impl::ProfilerConfig config_of(const ProfileKwargs& options) {
  return impl::ProfilerConfig(impl::ProfilerState::KINETO, options.record_shapes, options.profile_memory,
                              options.with_stack, options.with_flops, options.with_modules);
}

// Event times in microseconds: LibTorch 2 counts nanoseconds, 1.13 microseconds.
double start_us(const kineto::KinetoEvent& event) {
#if TORCH_VERSION_MAJOR >= 2
  return static_cast<double>(event.startNs()) / 1000.0;
#else
  return static_cast<double>(event.startUs());
#endif
}
double duration_us(const kineto::KinetoEvent& event) {
#if TORCH_VERSION_MAJOR >= 2
  return static_cast<double>(event.durationNs()) / 1000.0;
#else
  return static_cast<double>(event.durationUs());
#endif
}

// A Chrome trace of the events LibTorch collected, for LibTorch builds
// without Kineto's own writer (Debian's 1.13 is one): each event a
// complete event ("ph": "X") on its thread, user-scope ranges under the
// category Kineto gives them.
void write_chrome_trace(const kineto::ProfilerResult& result, const std::filesystem::path& path, int process_index) {
  nlohmann::json events = nlohmann::json::array();
  for (const kineto::KinetoEvent& event : result.events()) {
    nlohmann::json entry = {{"name", event.name()},
                            {"ph", "X"},
                            {"ts", start_us(event)},
                            {"dur", duration_us(event)},
                            {"pid", process_index},
                            {"tid", event.startThreadId()},
                            {"cat", event.scope() == static_cast<std::uint8_t>(at::RecordScope::USER_SCOPE)
                                        ? "user_annotation"
                                        : "cpu_op"}};
    if (event.hasShapes()) {
      nlohmann::json shapes = nlohmann::json::array();
      for (const auto& shape : event.shapes()) shapes.push_back(shape);
      entry["args"]["Input Dims"] = std::move(shapes);
    }
    events.push_back(std::move(entry));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  out.flush();
  if (!out) {
    throw ConfigError("profiler: cannot write the trace '" + path.string() +
                      "'. Check ProfileKwargs::output_trace_dir and free space.");
  }
}

// Kineto's own writer where LibTorch has it (CUDA kernels, flows); ours otherwise.
void save_chrome_trace(kineto::ProfilerResult& result, const std::filesystem::path& path, int process_index) {
  static std::atomic<bool> kineto_writes{true};
  if (kineto_writes) {
    try {
      result.save(path.string());
      return;
    } catch (const c10::Error&) {
      kineto_writes = false;  // "requires Kineto support": this LibTorch was built without it
    }
  }
  write_chrome_trace(result, path, process_index);
}

class KinetoTrace final : public ProfileTrace {
 public:
  KinetoTrace(kineto::ProfilerResult& result, int cycle, int process_index)
      : result_(result), cycle_(cycle), process_index_(process_index) {}
  void export_chrome_trace(const std::filesystem::path& path) const override {
    save_chrome_trace(result_, path, process_index_);
  }
  [[nodiscard]] int cycle() const override { return cycle_; }

 private:
  kineto::ProfilerResult& result_;
  int cycle_;
  int process_index_;
};

}  // namespace

// "ProfilerStep#<n>" around each recorded step, as torch.profiler marks its
// steps, so a trace shows where one step ends and the next begins.
struct Profiler::StepRange {
  explicit StepRange(std::int64_t step)
      : name("ProfilerStep#" + std::to_string(step)), range(at::RecordScope::USER_SCOPE) {
    if (range.isActive()) range.before(name.c_str());
  }
  std::string name;  // outlives the range, which may keep a pointer to it
  at::RecordFunction range;
};

Profiler::Profiler(ProfileKwargs options, int process_index, bool cuda)
    : options_(std::move(options)), process_index_(process_index), cuda_(cuda) {
  (void)activities_of(options_, cuda_);  // checked now, on every rank alike
  if (options_.schedule_option) check_schedule(*options_.schedule_option);
  if (!options_.output_trace_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options_.output_trace_dir, error);
    if (error) {
      throw ConfigError("ProfileKwargs::output_trace_dir: cannot create '" + options_.output_trace_dir +
                        "': " + error.message() + ".");
    }
  }
  if (g_profiler_running.exchange(true)) {
    throw ConfigError(
        "profile(): another profiler is running in this process. Stop it first (one LibTorch "
        "profiler per process).");
  }
  try {
    enter(phase_at(0));
  } catch (...) {
    g_profiler_running = false;  // LibTorch refused to start: the next profile() may try again
    throw;
  }
}

Profiler::~Profiler() {
  try {
    stop();
  } catch (const std::exception& error) {
    // A destructor cannot throw; the trace is lost, and says so.
    std::fprintf(stderr, "%s (while stopping the profiler)\n", error.what());
  }
}

Profiler::Phase Profiler::phase_at(std::int64_t step) const {
  if (!options_.schedule_option) return Phase::Record;
  const ProfileSchedule& s = *options_.schedule_option;
  if (step < s.skip_first) return Phase::Idle;
  step -= s.skip_first;
  const std::int64_t cycle_length = s.wait + s.warmup + s.active;
  if (s.repeat > 0 && step / cycle_length >= s.repeat) return Phase::Idle;
  const std::int64_t at = step % cycle_length;
  if (at < s.wait) return Phase::Idle;
  if (at < s.wait + s.warmup) return Phase::Warmup;
  return at + 1 < cycle_length ? Phase::Record : Phase::RecordAndSave;
}

void Profiler::enter(Phase phase) {
  // A recording whose last active step just ended is finished first.
  if (phase_ == Phase::RecordAndSave && recording_) finish_recording();
  const auto activities = activities_of(options_, cuda_);
  if ((phase == Phase::Warmup || phase == Phase::Record || phase == Phase::RecordAndSave) && !prepared_) {
    kineto::prepareProfiler(config_of(options_), activities);
    prepared_ = true;
  }
  if ((phase == Phase::Record || phase == Phase::RecordAndSave) && !recording_) {
    kineto::enableProfiler(config_of(options_), activities);
    recording_ = true;
  }
  if (phase == Phase::Idle && recording_) finish_recording();  // a cycle cut short: keep what it has
  phase_ = phase;
  if (recording_) step_range_ = std::make_unique<StepRange>(step_);
}

void Profiler::finish_recording() {
  step_range_.reset();  // the step's range ends inside the recording
  std::unique_ptr<kineto::ProfilerResult> result = kineto::disableProfiler();
  recording_ = false;
  prepared_ = false;
  const int cycle = cycle_++;
  if (!result) return;
  if (!options_.output_trace_dir.empty()) {
    const std::string suffix = cycle == 0 ? "" : "." + std::to_string(cycle);
    const std::filesystem::path file = std::filesystem::path(options_.output_trace_dir) /
                                       ("trace_rank" + std::to_string(process_index_) + suffix + ".json");
    save_chrome_trace(*result, file, process_index_);
    files_.push_back(file);
  }
  if (options_.on_trace_ready) options_.on_trace_ready(KinetoTrace(*result, cycle, process_index_));
}

void Profiler::step() {
  if (stopped_) {
    throw ConfigError("Profiler::step: the profiler was stopped. Call profile() again.");
  }
  step_range_.reset();
  ++step_;
  enter(phase_at(step_));
}

void Profiler::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (recording_) {
    finish_recording();
  } else if (prepared_) {
    // Warmed up but never recorded: LibTorch's profiler is left running
    // unless enabled and disabled once; the empty result is dropped.
    kineto::enableProfiler(config_of(options_), activities_of(options_, cuda_));
    (void)kineto::disableProfiler();
    prepared_ = false;
  }
  g_profiler_running = false;
}

}  // namespace accelerate
