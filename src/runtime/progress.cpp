#include "accelerate/runtime/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

namespace accelerate {

namespace {

ProgressStyle resolve(ProgressStyle style, std::FILE* stream, bool shown) {
  if (!shown) return ProgressStyle::Off;
  if (style != ProgressStyle::Auto) return style;
  return isatty(fileno(stream)) == 1 ? ProgressStyle::Bar : ProgressStyle::Lines;
}

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", seconds);
  return text;
}

}  // namespace

Progress::Progress(std::string label, std::int64_t total, ProgressOptions options, std::FILE* stream)
    : label_(std::move(label)),
      total_(total),
      options_(options),
      stream_(stream != nullptr ? stream : stderr),
      style_(resolve(options.style, stream_, options.shown)),
      start_(Clock::now()) {}

Progress::~Progress() { finish(); }

void Progress::advance(std::int64_t count, std::string_view detail) {
  if (finished_) return;
  done_ += count;
  if (!detail.empty()) detail_ = detail;
  if (style_ == ProgressStyle::Off) return;
  const Clock::time_point now = Clock::now();
  if (now - start_ < options_.delay) return;
  const auto interval = style_ == ProgressStyle::Bar ? options_.bar_interval : options_.line_interval;
  if (!last_shown_ || now - *last_shown_ >= interval) show(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (style_ == ProgressStyle::Off) return;
  if (!last_shown_ && Clock::now() - start_ < options_.delay) return;  // over before it was worth showing
  show(true);
}

std::string Progress::status() const {
  std::string text = label_ + ": " + std::to_string(done_);
  if (total_ > 0) {
    text +=
        "/" + std::to_string(total_) + " (" + std::to_string(std::min<std::int64_t>(100, done_ * 100 / total_)) + "%)";
  }
  text += " " + seconds_text(std::chrono::duration<double>(Clock::now() - start_).count());
  if (!detail_.empty()) text += " " + detail_;
  return text;
}

void Progress::show(bool last) {
  last_shown_ = Clock::now();
  if (style_ == ProgressStyle::Bar) {
    std::string bar;
    if (total_ > 0) {
      const int width = std::max(options_.width, 1);
      const auto filled = static_cast<int>(std::min<std::int64_t>(width, done_ * width / total_));
      bar = "[" + std::string(static_cast<std::size_t>(filled), '#') +
            std::string(static_cast<std::size_t>(width - filled), '.') + "] ";
    }
    // "\033[K" clears what a longer previous line left behind.
    std::fprintf(stream_, "\r%s%s\033[K%s", bar.c_str(), status().c_str(), last ? "\n" : "");
  } else {
    std::fprintf(stream_, "%s\n", status().c_str());
  }
  std::fflush(stream_);
}

}  // namespace accelerate
