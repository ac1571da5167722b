// save_state/load_state show their progress on the main process only: plain
// lines without carriage returns when stderr is a file (a batch log), a bar
// redrawn in place when it is a terminal (a real pseudo-terminal here), and
// nothing for a save shorter than the delay.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "accelerate/training/accelerator.hpp"
#include "common/gpu_skip.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
namespace fs = std::filesystem;
using std::chrono::milliseconds;

class CheckpointProgress : public acc::testing::DefaultDeviceTest {};

// Runs `work` with this process's stderr sent to `fd`, then restores it.
void with_stderr_on(int fd, const std::function<void()>& work) {
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  ASSERT_GE(saved, 0);
  ASSERT_GE(dup2(fd, STDERR_FILENO), 0);
  try {
    work();
  } catch (...) {
    std::fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    throw;
  }
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> found;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) found.push_back(line);
  }
  return found;
}

// 2 x 1024 x 768 float parameters (6 MiB) and, after one Adam step, twice
// that in moments: 18 MiB of state.
struct Wide : torch::nn::Module {
  Wide() {
    a = register_module("a", torch::nn::Linear(torch::nn::LinearOptions(1024, 768).bias(false)));
    b = register_module("b", torch::nn::Linear(torch::nn::LinearOptions(768, 1024).bias(false)));
  }
  torch::Tensor forward(const torch::Tensor& x) { return b->forward(a->forward(x)); }
  torch::nn::Linear a{nullptr}, b{nullptr};
};

constexpr std::int64_t kStateMiB = 18;

// Prepares a Wide model and Adam, steps once (so the moments exist), then
// saves to and loads from `checkpoint` with `progress`, stderr on `fd`.
void save_and_load(const fs::path& checkpoint, const acc::ProgressOptions& progress, int fd) {
  acc::Accelerator accelerator({.project_config = {.progress = progress}});
  auto net = std::make_shared<Wide>();
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3));
  auto [model, optimizer] = accelerator.prepare(net, adam);
  accelerator.backward(model->forward<Wide>(torch::ones({2, 1024})).sum());
  optimizer->step();
  with_stderr_on(fd, [&] {
    accelerator.save_state(checkpoint);
    accelerator.load_state(checkpoint);
  });
}

TEST_F(CheckpointProgress, BatchLogsGetPlainLinesFromTheMainProcessOnly) {
  const fs::path dir = acc::testing::shared_temp_directory("checkpoint_progress_lines");
  const fs::path log = dir / ("stderr_" + std::to_string(acc::testing::world_rank()) + ".log");
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  save_and_load(dir / "ckpt", {.delay = milliseconds(0), .line_interval = milliseconds(0)}, fd);
  close(fd);
  const std::string text = read_text(log);
  const auto saves = lines_with(text, "save_state '" + (dir / "ckpt").string() + "' (MiB): ");
  const auto loads = lines_with(text, "load_state '" + (dir / "ckpt").string() + "' (MiB): ");
  if (acc::testing::world_rank() != 0) {
    EXPECT_TRUE(saves.empty() && loads.empty()) << text;
  } else {
    EXPECT_EQ(text.find('\r'), std::string::npos) << text;
    // A line per tensor written (at least the two weights and four moments),
    // the count in MiB rising to the whole state.
    ASSERT_GE(saves.size(), 6U) << text;
    EXPECT_NE(saves.front().find("/" + std::to_string(kStateMiB) + " ("), std::string::npos) << text;
    EXPECT_NE(saves.back().find(": " + std::to_string(kStateMiB) + "/" + std::to_string(kStateMiB) + " (100%)"),
              std::string::npos)
        << text;
    // The load counts the file's entries (the state and the small ones), and ends complete.
    ASSERT_GE(loads.size(), 2U) << text;
    EXPECT_NE(loads.back().find("(100%)"), std::string::npos) << text;
  }
  acc::testing::remove_shared_directory(dir);
}

TEST_F(CheckpointProgress, ATerminalGetsABarRedrawnInPlace) {
  const fs::path dir = acc::testing::shared_temp_directory("checkpoint_progress_bar");
  int controller = -1;
  int terminal = -1;
  ASSERT_EQ(openpty(&controller, &terminal, nullptr, nullptr, nullptr), 0);
  fcntl(controller, F_SETFL, O_NONBLOCK);
  std::string seen;
  const auto drain = [&] {
    char buffer[4096];
    for (ssize_t n = read(controller, buffer, sizeof buffer); n > 0; n = read(controller, buffer, sizeof buffer)) {
      seen.append(buffer, static_cast<std::size_t>(n));
    }
  };
  save_and_load(dir / "ckpt", {.delay = milliseconds(0), .bar_interval = milliseconds(0)}, terminal);
  close(terminal);
  drain();
  close(controller);
  if (acc::testing::world_rank() == 0) {
    EXPECT_NE(seen.find("\r["), std::string::npos) << seen;
    EXPECT_NE(seen.find("] save_state '"), std::string::npos) << seen;
    EXPECT_NE(seen.find("] load_state '"), std::string::npos) << seen;
    EXPECT_NE(seen.find("(100%)"), std::string::npos) << seen;
    // One newline per finished bar: the save's and the load's.
    EXPECT_EQ(std::count(seen.begin(), seen.end(), '\n'), 2) << seen;
  } else {
    EXPECT_EQ(seen.find("save_state"), std::string::npos) << seen;
  }
  acc::testing::remove_shared_directory(dir);
}

TEST_F(CheckpointProgress, ASaveShorterThanTheDelayStaysSilent) {
  const fs::path dir = acc::testing::shared_temp_directory("checkpoint_progress_quiet");
  const fs::path log = dir / ("stderr_" + std::to_string(acc::testing::world_rank()) + ".log");
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  save_and_load(dir / "ckpt", {.delay = std::chrono::hours(1), .line_interval = milliseconds(0)}, fd);
  close(fd);
  const std::string text = read_text(log);
  EXPECT_EQ(text.find("save_state '"), std::string::npos) << text;
  EXPECT_EQ(text.find("load_state '"), std::string::npos) << text;
  acc::testing::remove_shared_directory(dir);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
