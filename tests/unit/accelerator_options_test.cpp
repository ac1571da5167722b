// resolve_settings: explicit option > ACCELERATE_* environment > configuration
// file > default, for every setting the Accelerator resolves.
#include "accelerate/training/accelerator_options.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "accelerate/error.hpp"
#include "accelerate/runtime/config_file.hpp"
#include "accelerate/runtime/env_config.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::AcceleratorOptions;
using accelerate::ConfigFile;
using accelerate::EnvConfig;
using accelerate::MixedPrecision;
using accelerate::resolve_settings;

TEST(ResolveSettings, DefaultsWithoutEnvironmentOrFile) {
  const auto settings = resolve_settings({}, EnvConfig{}, nullptr);
  EXPECT_FALSE(settings.cpu);
  EXPECT_EQ(settings.mixed_precision, MixedPrecision::No);
  EXPECT_EQ(settings.accumulation.num_steps, 1);
  EXPECT_FALSE(settings.numa_affinity);
  EXPECT_EQ(settings.timeout.count(), 1800);
  EXPECT_FALSE(settings.debug_mode);
}

TEST(ResolveSettings, FileThenEnvironmentThenOptionWin) {
  ConfigFile file;
  file.mixed_precision = "bf16";
  file.gradient_accumulation_steps = 4;
  EnvConfig environment;
  AcceleratorOptions options;

  auto settings = resolve_settings(options, environment, &file);
  EXPECT_EQ(settings.mixed_precision, MixedPrecision::BF16);  // the file beats the default
  EXPECT_EQ(settings.accumulation.num_steps, 4);

  environment.mixed_precision = "no";
  environment.gradient_accumulation_steps = 2;
  settings = resolve_settings(options, environment, &file);
  EXPECT_EQ(settings.mixed_precision, MixedPrecision::No);  // the environment beats the file
  EXPECT_EQ(settings.accumulation.num_steps, 2);

  options.mixed_precision = "fp16";
  options.gradient_accumulation_steps = 8;
  settings = resolve_settings(options, environment, &file);
  EXPECT_EQ(settings.mixed_precision, MixedPrecision::FP16);  // an explicit option beats both
  EXPECT_EQ(settings.accumulation.num_steps, 8);
}

TEST(ResolveSettings, BooleansFromFileEnvironmentAndOption) {
  ConfigFile file;
  file.use_cpu = true;
  file.cpu_affinity = true;
  EXPECT_TRUE(resolve_settings({}, EnvConfig{}, &file).cpu);
  EXPECT_TRUE(resolve_settings({}, EnvConfig{}, &file).numa_affinity);
  EnvConfig environment;
  environment.use_cpu = true;
  EXPECT_TRUE(resolve_settings({}, environment, nullptr).cpu);
  AcceleratorOptions options;
  options.cpu = false;
  options.numa_affinity = false;
  const auto settings = resolve_settings(options, environment, &file);
  EXPECT_FALSE(settings.cpu);  // explicit false wins over the environment and the file
  EXPECT_FALSE(settings.numa_affinity);
}

TEST(ResolveSettings, PluginIsTakenWholeAndConflictsWithSteps) {
  AcceleratorOptions options;
  options.gradient_accumulation_plugin = accelerate::GradientAccumulationPlugin{.num_steps = 3, .sync_each_batch = true};
  EnvConfig environment;
  environment.gradient_accumulation_steps = 5;  // ignored: the plugin was given explicitly
  const auto settings = resolve_settings(options, environment, nullptr);
  EXPECT_EQ(settings.accumulation.num_steps, 3);
  EXPECT_TRUE(settings.accumulation.sync_each_batch);

  options.gradient_accumulation_steps = 2;
  EXPECT_THROW(resolve_settings(options, environment, nullptr), accelerate::ConfigError);
  options.gradient_accumulation_steps.reset();
  options.gradient_accumulation_plugin->num_steps = 0;
  EXPECT_THROW(resolve_settings(options, environment, nullptr), accelerate::ConfigError);
}

TEST(ResolveSettings, InvalidMixedPrecisionNamesTheValue) {
  AcceleratorOptions options;
  options.mixed_precision = "fp8";
  try {
    resolve_settings(options, EnvConfig{}, nullptr);
    FAIL() << "fp8 was accepted";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("fp8"), std::string::npos) << error.what();
  }
}

TEST(ResolveSettings, UnknownKeysOfTheFileAreReported) {
  ConfigFile file;
  file.unknown_keys = {"distributed_type", "num_processes"};
  EXPECT_EQ(resolve_settings({}, EnvConfig{}, &file).ignored_config_keys, file.unknown_keys);
}

// One row per setting: what the default, the file, the environment and an
// explicit option (where the Accelerator has one) each give, and how the
// resolved settings show it. Every layer is set to a different value, so each
// step of explicit option > environment > file > default is seen to win.
struct SettingRow {
  std::string key;  // the configuration file's key
  std::string by_default, from_file, from_environment, from_option;
  std::function<void(ConfigFile&)> set_file;
  std::function<void(EnvConfig&)> set_environment;
  std::function<void(AcceleratorOptions&)> set_option;  // empty: no Accelerator option
  std::function<std::string(const accelerate::ResolvedSettings&)> read;
};

std::string text(bool value) { return value ? "true" : "false"; }

std::vector<SettingRow> setting_rows() {
  using std::chrono::seconds;
  return {
      {"mixed_precision", "no", "bf16", "no", "fp16", [](ConfigFile& f) { f.mixed_precision = "bf16"; },
       [](EnvConfig& e) { e.mixed_precision = "no"; }, [](AcceleratorOptions& o) { o.mixed_precision = "fp16"; },
       [](const auto& s) { return std::string(accelerate::to_string(s.mixed_precision)); }},
      {"use_cpu", "false", "true", "false", "true", [](ConfigFile& f) { f.use_cpu = true; },
       [](EnvConfig& e) { e.use_cpu = false; }, [](AcceleratorOptions& o) { o.cpu = true; },
       [](const auto& s) { return text(s.cpu); }},
      {"debug", "false", "true", "false", "", [](ConfigFile& f) { f.debug_mode = true; },
       [](EnvConfig& e) { e.debug_mode = false; }, {}, [](const auto& s) { return text(s.debug_mode); }},
      {"enable_cpu_affinity", "false", "true", "false", "true", [](ConfigFile& f) { f.cpu_affinity = true; },
       [](EnvConfig& e) { e.cpu_affinity = false; }, [](AcceleratorOptions& o) { o.numa_affinity = true; },
       [](const auto& s) { return text(s.numa_affinity); }},
      {"gradient_accumulation_steps", "1", "4", "2", "8", [](ConfigFile& f) { f.gradient_accumulation_steps = 4; },
       [](EnvConfig& e) { e.gradient_accumulation_steps = 2; },
       [](AcceleratorOptions& o) { o.gradient_accumulation_steps = 8; },
       [](const auto& s) { return std::to_string(s.accumulation.num_steps); }},
      {"log_level", "INFO", "ERROR", "DEBUG", "", [](ConfigFile& f) { f.log_level = "error"; },
       [](EnvConfig& e) { e.log_level = "debug"; }, {},
       [](const auto& s) { return std::string(accelerate::to_string(s.log_level)); }},
      {"timeout", "1800", "60", "30", "1800", [](ConfigFile& f) { f.timeout = seconds(60); },
       [](EnvConfig& e) { e.timeout = seconds(30); },
       // Explicitly the default value: still explicit, so it wins.
       [](AcceleratorOptions& o) { o.init_kwargs.timeout = seconds(1800); },
       [](const auto& s) { return std::to_string(s.timeout.count()); }},
      {"mpi_thread_level", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED", "MPI_THREAD_SINGLE", "",
       [](ConfigFile& f) { f.mpi_thread_level = "serialized"; }, [](EnvConfig& e) { e.mpi_thread_level = "single"; },
       {}, [](const auto& s) { return std::string(accelerate::to_string(s.mpi_thread_level)); }},
      {"emulated_ranks_per_node", "0", "2", "1", "", [](ConfigFile& f) { f.emulated_ranks_per_node = 2; },
       [](EnvConfig& e) { e.emulated_ranks_per_node = 1; }, {},
       [](const auto& s) { return std::to_string(s.emulated_ranks_per_node); }},
  };
}

TEST(ResolveSettings, EverySettingFollowsOptionEnvironmentFileDefault) {
  for (const SettingRow& row : setting_rows()) {
    SCOPED_TRACE(row.key);
    ConfigFile file;
    EnvConfig environment;
    AcceleratorOptions options;
    EXPECT_EQ(row.read(resolve_settings(options, environment, &file)), row.by_default);
    row.set_file(file);
    EXPECT_EQ(row.read(resolve_settings(options, environment, &file)), row.from_file);
    row.set_environment(environment);
    EXPECT_EQ(row.read(resolve_settings(options, environment, &file)), row.from_environment);
    if (row.set_option) {
      row.set_option(options);
      EXPECT_EQ(row.read(resolve_settings(options, environment, &file)), row.from_option);
    }
  }
}

// The table covers every key a configuration file can hold: a key added to
// the file without a row here fails this test.
TEST(ResolveSettings, TheTableCoversEveryKeyOfTheFile) {
  ConfigFile full;
  for (const SettingRow& row : setting_rows()) row.set_file(full);
  std::set<std::string> keys;
  for (const accelerate::ConfigEntry& entry : accelerate::config_entries(full)) keys.insert(entry.key);
  std::set<std::string> rows;
  for (const SettingRow& row : setting_rows()) rows.insert(row.key);
  EXPECT_EQ(keys, rows);
  const auto parsed = accelerate::parse_config_file(
      "mixed_precision: bf16\nuse_cpu: true\ndebug: true\nenable_cpu_affinity: true\n"
      "gradient_accumulation_steps: 4\nlog_level: error\ntimeout: 60\nmpi_thread_level: serialized\n"
      "emulated_ranks_per_node: 2\n",
      "table.yaml");
  EXPECT_TRUE(parsed.unknown_keys.empty());
  full.source = parsed.source;
  EXPECT_EQ(parsed, full);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
