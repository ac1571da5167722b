// Progress of long work (an epoch, a large checkpoint): a bar redrawn in
// place on a terminal, plain periodic lines in a batch log, so a Slurm
// output file gets readable lines instead of carriage-return noise.
//
//   accelerate::Progress progress("epoch 3", steps, {.shown = accelerator.is_main_process()});
//   for (...) { ...; progress.advance(1, "loss 0.1234"); }
//   progress.finish();
//
// No MPI, no LibTorch: which process shows it is the caller's choice.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace accelerate {

/// How progress is shown.
enum class ProgressStyle {
  Auto,   ///< Bar on a terminal, Lines otherwise
  Bar,    ///< one line redrawn in place (a carriage return first), ended by a newline
  Lines,  ///< a complete line at most every line_interval, and the last one
  Off,    ///< nothing
};

struct ProgressOptions {
  /// Whether this process shows anything (typically: the main process).
  bool shown = true;
  ProgressStyle style = ProgressStyle::Auto;
  /// Nothing is shown before the work has run this long (work that ends
  /// sooner stays silent; the final line too).
  std::chrono::milliseconds delay{0};
  /// A bar is redrawn at most this often.
  std::chrono::milliseconds bar_interval{100};
  /// In a log, a line at most this often (the last one always).
  std::chrono::milliseconds line_interval{std::chrono::seconds(30)};
  /// Characters of the bar itself.
  int width = 30;
};

/// One piece of work of `total` units (0 or less: unknown, no bar or
/// percentage). Not thread-safe: advanced from one thread.
class Progress {
 public:
  /// Writes to `stream` (stderr when null). With ProgressStyle::Auto the
  /// style is Bar when the stream is a terminal and Lines otherwise.
  Progress(std::string label, std::int64_t total, ProgressOptions options = {}, std::FILE* stream = nullptr);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  /// Finishes the display (see finish()).
  ~Progress();

  /// `count` more units done; `detail` (e.g. "loss 0.1234") is shown after the count.
  void advance(std::int64_t count = 1, std::string_view detail = {});
  /// Ends the display: the bar's last state and a newline, or the last line
  /// (when anything was shown, or the delay has passed). Later calls do nothing.
  void finish();

  /// The style in use (Auto resolved).
  [[nodiscard]] ProgressStyle style() const noexcept { return style_; }
  [[nodiscard]] std::int64_t done() const noexcept { return done_; }

 private:
  using Clock = std::chrono::steady_clock;
  void show(bool last);
  [[nodiscard]] std::string status() const;

  std::string label_;
  std::int64_t total_;
  ProgressOptions options_;
  std::FILE* stream_;
  ProgressStyle style_;
  Clock::time_point start_;
  std::optional<Clock::time_point> last_shown_;
  std::int64_t done_ = 0;
  std::string detail_;
  bool finished_ = false;
};

}  // namespace accelerate
