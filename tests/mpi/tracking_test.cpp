// Experiment trackers through the Accelerator at 1, 2 and 4 ranks: the
// built-in CSV and JSON-lines trackers write one set of files, on the main
// process; a tracker of one's own is called where it says it runs; names,
// missing directories and bad files are errors on every rank. The
// TensorBoard tracker's framing is checked here against a bitwise CRC-32C;
// TensorBoard's own reader opens its files in tensorboard_reader_test.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/tracking/file_trackers.hpp"
#include "accelerate/training/accelerator.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
namespace fs = std::filesystem;
using acc::testing::world_rank;
using acc::testing::world_size;

std::vector<std::string> lines_of(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// CRC-32C one bit at a time (reflected polynomial 0x82f63b78), masked as
// TFRecord framing masks it: independent of the library's kernels.
std::uint32_t reference_masked_crc32c(const char* data, std::size_t size) {
  std::uint32_t crc = 0xffffffffU;
  for (std::size_t i = 0; i < size; ++i) {
    crc ^= static_cast<unsigned char>(data[i]);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1U) ^ (0x82f63b78U & (0U - (crc & 1U)));
  }
  crc = ~crc;
  return ((crc >> 15U) | (crc << 17U)) + 0xa282ead8U;
}

template <typename T>
T little_endian(const std::string& bytes, std::size_t at) {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    value |= static_cast<T>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return value;
}

// The payloads of a TFRecord file; fails the test on a bad length or checksum.
std::vector<std::string> tfrecords(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> payloads;
  std::size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) {
      ADD_FAILURE() << file << ": a record header is cut at byte " << at;
      break;
    }
    const auto length = little_endian<std::uint64_t>(bytes, at);
    EXPECT_EQ(little_endian<std::uint32_t>(bytes, at + 8), reference_masked_crc32c(bytes.data() + at, 8))
        << "length checksum of the record at byte " << at;
    if (bytes.size() - at - 12 < length + 4) {
      ADD_FAILURE() << file << ": the record at byte " << at << " is cut";
      break;
    }
    const std::string payload = bytes.substr(at + 12, length);
    EXPECT_EQ(little_endian<std::uint32_t>(bytes, at + 12 + length), reference_masked_crc32c(payload.data(), length))
        << "data checksum of the record at byte " << at;
    payloads.push_back(payload);
    at += 12 + length + 4;
  }
  return payloads;
}

std::vector<fs::path> event_files(const fs::path& directory) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(directory)) {
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) files.push_back(entry.path());
  }
  return files;
}

// Counts the calls it receives, on whichever process it runs.
class CountingTracker final : public acc::tracking::GeneralTracker {
 public:
  explicit CountingTracker(bool everywhere) : everywhere_(everywhere) {}
  [[nodiscard]] std::string name() const override { return everywhere_ ? "everywhere" : "main_only"; }
  [[nodiscard]] bool main_process_only() const override { return !everywhere_; }
  void store_init_configuration(const acc::tracking::LogValues& config) override { configs += config.size(); }
  void log(const acc::tracking::LogValues& values, std::optional<std::int64_t> step) override {
    logs += 1;
    last_step = step;
    last_values = values;
  }
  void finish() override { finished += 1; }

  std::size_t configs = 0;
  int logs = 0;
  int finished = 0;
  std::optional<std::int64_t> last_step;
  acc::tracking::LogValues last_values;

 private:
  bool everywhere_;
};

TEST(Tracking, BuiltInTrackersWriteOneSetOfFilesOnTheMainProcess) {
  const fs::path project = acc::testing::shared_temp_directory("tracking_files");
  {
    acc::Accelerator accelerator({.project_config = {.project_dir = project.string()}, .log_with = {"csv", "jsonl"}});
    accelerator.init_trackers("run", {{"lr", 0.001}, {"batch_size", 32}, {"optimizer", "adam, w"}});
    for (int step = 0; step < 3; ++step) {
      accelerator.log({{"loss", 1.0 / (step + 1)}, {"epoch", 0}}, step);
    }
    accelerator.log({{"note", "line one\n\"two\""}, {"bad", std::numeric_limits<double>::quiet_NaN()}});
    accelerator.end_training();
  }
  const fs::path run = project / "run";
  // Every rank sees the same files (one file system): written once, by the main process.
  const auto csv = lines_of(run / "metrics.csv");
  ASSERT_EQ(csv.size(), 1U + 6U + 3U) << "header, 3 steps x 2 values, then the quoted text spans 2 lines and nan";
  EXPECT_EQ(csv[0], "wall_time,step,name,value");
  EXPECT_NE(csv[1].find(",0,epoch,0"), std::string::npos) << csv[1];
  EXPECT_NE(csv[2].find(",0,loss,1"), std::string::npos) << csv[2];
  EXPECT_NE(csv[4].find(",1,loss,0.5"), std::string::npos) << csv[4];
  EXPECT_NE(csv[6].find(",2,loss,0.3333333333333333"), std::string::npos) << csv[6];  // reads back exactly
  EXPECT_NE(csv[7].find(",,bad,nan"), std::string::npos) << csv[7];                   // no step given
  EXPECT_NE(csv[8].find(",,note,\"line one"), std::string::npos) << csv[8];
  EXPECT_EQ(csv[9], "\"\"two\"\"\"");
  const auto config_csv = lines_of(run / "config.csv");
  EXPECT_EQ(config_csv, (std::vector<std::string>{"name,value", "batch_size,32", "lr,0.001", "optimizer,\"adam, w\""}));

  const auto jsonl = lines_of(run / "metrics.jsonl");
  ASSERT_EQ(jsonl.size(), 4U);
  const auto first = nlohmann::json::parse(jsonl[0]);
  EXPECT_EQ(first["step"], 0);
  EXPECT_EQ(first["values"]["loss"], 1.0);
  EXPECT_EQ(first["values"]["epoch"], 0);
  EXPECT_TRUE(first["wall_time"].is_number());
  const auto last = nlohmann::json::parse(jsonl[3]);
  EXPECT_TRUE(last["step"].is_null());
  EXPECT_EQ(last["values"]["bad"], "NaN");
  EXPECT_EQ(last["values"]["note"], "line one\n\"two\"");
  std::ifstream config_json(run / "config.json");
  const auto config = nlohmann::json::parse(config_json);
  EXPECT_EQ(config["lr"], 0.001);
  EXPECT_EQ(config["batch_size"], 32);
  acc::testing::remove_shared_directory(project);
}

TEST(Tracking, TensorBoardWritesOneFramedEventFileOnTheMainProcess) {
  if (!acc::config::has_tensorboard) {
    // The build without protobuf says so at construction, on every rank.
    const auto message =
        acc::testing::error_of<acc::FeatureNotBuilt>([] { acc::Accelerator a({.log_with = {"tensorboard"}}); });
    EXPECT_NE(message.find("ACCELERATE_WITH_TENSORBOARD"), std::string::npos) << message;
    return;
  }
  const fs::path project = acc::testing::shared_temp_directory("tracking_tensorboard");
  {
    acc::Accelerator accelerator({.project_config = {.project_dir = project.string()}, .log_with = {"all"}});
    accelerator.init_trackers("run", {{"lr", 0.5}});
    for (int step = 0; step < 4; ++step) accelerator.log({{"loss", 1.0 / (step + 1)}}, step);
    const std::vector<double> values = {1.0, 2.0, 2.5, 4.0};
    // Every tracker gets it; the file trackers ignore it.
    for (const char* name : {"tensorboard", "csv", "jsonl"})
      accelerator.get_tracker(name).log_histogram("w", values, 4);
    accelerator.end_training();
  }
  const auto files = event_files(project / "run");
  ASSERT_EQ(files.size(), 1U) << "one event file, the main process's";
  const auto records = tfrecords(files.front());
  ASSERT_EQ(records.size(), 1U + 1U + 4U + 1U) << "file version, hyper-parameters, 4 steps, 1 histogram";
  EXPECT_NE(records.front().find("brain.Event:2"), std::string::npos);
  EXPECT_NE(records[1].find("_hparams_/session_start_info"), std::string::npos);
  EXPECT_EQ(lines_of(project / "run" / "metrics.jsonl").size(), 4U) << "the histogram is not a JSON line";
  acc::testing::remove_shared_directory(project);
}

TEST(Tracking, AResumedRunAppendsToItsFiles) {
  const fs::path project = acc::testing::shared_temp_directory("tracking_resume");
  for (int attempt = 0; attempt < 2; ++attempt) {
    acc::Accelerator accelerator({.project_config = {.project_dir = project.string()}, .log_with = {"csv"}});
    accelerator.init_trackers("run");
    accelerator.log({{"loss", attempt}}, attempt);
    accelerator.end_training();
  }
  const auto csv = lines_of(project / "run" / "metrics.csv");
  ASSERT_EQ(csv.size(), 3U) << "one header, one row per run";
  EXPECT_NE(csv[2].find(",1,loss,1"), std::string::npos) << csv[2];
  EXPECT_FALSE(fs::exists(project / "run" / "metrics.jsonl"));
  acc::testing::remove_shared_directory(project);
}

TEST(Tracking, OwnTrackersRunWhereTheySay) {
  auto main_only = std::make_shared<CountingTracker>(false);
  auto everywhere = std::make_shared<CountingTracker>(true);
  acc::Accelerator accelerator({.log_with = {main_only, everywhere}});
  accelerator.init_trackers("run", {{"seed", 7}});
  accelerator.log({{"loss", 0.25}}, 5);
  accelerator.get_tracker("main_only").log({{"direct", 1}}, 6);
  accelerator.end_training();
  accelerator.end_training();  // finishing twice finishes once
  const bool main = world_rank() == 0;
  EXPECT_EQ(main_only->logs, main ? 2 : 0);
  EXPECT_EQ(main_only->configs, main ? 1U : 0U);
  EXPECT_EQ(main_only->finished, main ? 1 : 0);
  EXPECT_EQ(everywhere->logs, 1);
  EXPECT_EQ(everywhere->configs, 1U);
  EXPECT_EQ(everywhere->finished, 1);
  EXPECT_EQ(everywhere->last_step, 5);
  EXPECT_EQ(everywhere->last_values, (acc::tracking::LogValues{{"loss", 0.25}}));
  // On the other processes, get_tracker gives a stand-in of the same name.
  EXPECT_EQ(accelerator.get_tracker("main_only").name(), "main_only");
}

TEST(Tracking, NamesAndDirectoriesAreCheckedOnEveryRank) {
  EXPECT_NE(acc::testing::error_of<acc::ConfigError>([] {
              acc::Accelerator a({.log_with = {"wandb"}});
            }).find("'wandb' is not a built-in tracker"),
            std::string::npos);
  {
    acc::Accelerator accelerator({.log_with = {"csv"}});
    const auto early = acc::testing::error_of<acc::ConfigError>([&] { accelerator.log({{"loss", 1.0}}, 0); });
    EXPECT_NE(early.find("Call init_trackers"), std::string::npos) << early;
    const auto message = acc::testing::error_of<acc::ConfigError>([&] { accelerator.init_trackers("run"); });
    EXPECT_NE(message.find("no logging directory"), std::string::npos) << message;
    const auto unknown = acc::testing::error_of<acc::ConfigError>([&] { (void)accelerator.get_tracker("jsonl"); });
    EXPECT_NE(unknown.find("Chosen in log_with: csv"), std::string::npos) << unknown;
  }
  // The main process cannot create its files: every rank is told, not only the main one.
  const fs::path project = acc::testing::shared_temp_directory("tracking_blocked");
  if (world_rank() == 0) std::ofstream(project / "run") << "a file where the run's directory belongs";
  MPI_Barrier(MPI_COMM_WORLD);
  acc::Accelerator accelerator({.project_config = {.project_dir = project.string()}, .log_with = {"jsonl"}});
  const auto message = acc::testing::error_of<acc::ConfigError>([&] { accelerator.init_trackers("run"); });
  EXPECT_NE(message.find("cannot create the directory"), std::string::npos) << message;
  EXPECT_NE(message.find((project / "run").string()), std::string::npos) << message;
  if (world_rank() != 0) EXPECT_NE(message.find("another process failed"), std::string::npos) << message;
  // Once the obstacle is gone, the same Accelerator starts its trackers.
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove(project / "run");
  MPI_Barrier(MPI_COMM_WORLD);
  accelerator.init_trackers("run");
  accelerator.log({{"loss", 2.0}}, 1);
  accelerator.end_training();
  EXPECT_EQ(lines_of(project / "run" / "metrics.jsonl").size(), 1U);
  acc::testing::remove_shared_directory(project);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
