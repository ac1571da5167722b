// Progress on a pseudo-terminal (a bar redrawn in place) and in a file (plain
// lines, no carriage returns, throttled), the delay that keeps short work
// silent, and a process that does not show progress.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "accelerate/runtime/progress.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::Progress;
using accelerate::ProgressStyle;
using std::chrono::hours;
using std::chrono::milliseconds;

std::string contents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) text.push_back(static_cast<char>(c));
  return text;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  for (const char c : text) {
    if (c == '\n') {
      lines.push_back(line);
      line.clear();
    } else {
      line.push_back(c);
    }
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

TEST(Progress, OnAPseudoTerminalABarIsRedrawnInPlace) {
  int controller = -1;
  int terminal = -1;
  ASSERT_EQ(openpty(&controller, &terminal, nullptr, nullptr, nullptr), 0);
  std::FILE* out = fdopen(terminal, "w");
  ASSERT_NE(out, nullptr);
  {
    Progress progress("work", 4, {.bar_interval = milliseconds(0), .width = 8}, out);
    EXPECT_EQ(progress.style(), ProgressStyle::Bar);
    for (int i = 0; i < 4; ++i) progress.advance(1, "loss 0.5");
  }
  std::fclose(out);
  std::string seen;
  fcntl(controller, F_SETFL, O_NONBLOCK);
  char buffer[4096];
  for (ssize_t n = read(controller, buffer, sizeof buffer); n > 0; n = read(controller, buffer, sizeof buffer)) {
    seen.append(buffer, static_cast<std::size_t>(n));
  }
  close(controller);
  // One redraw per unit and the final one, each returning to the line's start.
  EXPECT_GE(std::count(seen.begin(), seen.end(), '\r'), 5) << seen;
  EXPECT_NE(seen.find("\r[##......] work: 1/4 (25%)"), std::string::npos) << seen;
  EXPECT_NE(seen.find("\r[########] work: 4/4 (100%)"), std::string::npos) << seen;
  EXPECT_NE(seen.find("loss 0.5"), std::string::npos) << seen;
  // The bar ends with a newline (the terminal shows it as "\r\n"), once.
  EXPECT_EQ(std::count(seen.begin(), seen.end(), '\n'), 1) << seen;
  EXPECT_EQ(seen.back(), '\n') << seen;
}

TEST(Progress, InAFileEveryLineIsCompleteWithoutCarriageReturns) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    Progress progress("epoch 2", 10, {.line_interval = milliseconds(0)}, file);
    EXPECT_EQ(progress.style(), ProgressStyle::Lines);
    for (int i = 0; i < 10; ++i) progress.advance();
    progress.finish();
    progress.finish();  // once only
  }
  const std::string text = contents(file);
  std::fclose(file);
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  const auto lines = lines_of(text);
  ASSERT_EQ(lines.size(), 11U) << text;  // one per unit, and the last
  EXPECT_EQ(lines.front().rfind("epoch 2: 1/10 (10%) ", 0), 0U) << lines.front();
  EXPECT_EQ(lines.back().rfind("epoch 2: 10/10 (100%) ", 0), 0U) << lines.back();
}

TEST(Progress, LinesAreThrottledToOnePerInterval) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    Progress progress("save_state", 1000, {.line_interval = hours(1)}, file);
    for (int i = 0; i < 1000; ++i) progress.advance();
  }
  const auto lines = lines_of(contents(file));
  std::fclose(file);
  ASSERT_EQ(lines.size(), 2U);  // the first unit, then the last line
  EXPECT_EQ(lines[0].rfind("save_state: 1/1000 (0%)", 0), 0U) << lines[0];
  EXPECT_EQ(lines[1].rfind("save_state: 1000/1000 (100%)", 0), 0U) << lines[1];
}

TEST(Progress, WorkShorterThanTheDelayStaysSilent) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    Progress progress("quick", 3, {.delay = hours(1), .line_interval = milliseconds(0)}, file);
    for (int i = 0; i < 3; ++i) progress.advance();
  }
  EXPECT_EQ(contents(file), "");
  std::fclose(file);
}

TEST(Progress, AProcessThatDoesNotShowItWritesNothing) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    Progress progress("work", 2, {.shown = false, .style = ProgressStyle::Bar}, file);
    EXPECT_EQ(progress.style(), ProgressStyle::Off);
    progress.advance(2);
    EXPECT_EQ(progress.done(), 2);
  }
  EXPECT_EQ(contents(file), "");
  std::fclose(file);
}

TEST(Progress, UnknownTotalsCountWithoutABar) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    Progress progress("stream", 0, {.line_interval = hours(1)}, file);
    progress.advance(7, "eof");
  }
  const auto lines = lines_of(contents(file));
  std::fclose(file);
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[1].rfind("stream: 7 ", 0), 0U) << lines[1];
  EXPECT_NE(lines[1].find(" eof"), std::string::npos) << lines[1];
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
