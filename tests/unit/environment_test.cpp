// patch_environment / clear_environment restore the environment exactly,
// also on exceptions; typed reads reject junk with the variable's name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

#include "accelerate/error.hpp"
#include "accelerate/runtime/env_config.hpp"
#include "accelerate/runtime/environment.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::get_env;

TEST(PatchEnvironment, SetsUpperCasedKeysAndRestores) {
  ::unsetenv("ACCEL_TEST_FOO");
  ::setenv("ACCEL_TEST_KEEP", "old", 1);
  {
    auto patch = accelerate::patch_environment({{"accel_test_foo", "bar"}, {"ACCEL_TEST_KEEP", "new"}});
    EXPECT_EQ(get_env("ACCEL_TEST_FOO"), "bar");
    EXPECT_FALSE(get_env("accel_test_foo"));
    EXPECT_EQ(get_env("ACCEL_TEST_KEEP"), "new");
  }
  EXPECT_FALSE(get_env("ACCEL_TEST_FOO"));
  EXPECT_EQ(get_env("ACCEL_TEST_KEEP"), "old");
}

TEST(PatchEnvironment, RestoresWhenLeftByException) {
  ::unsetenv("ACCEL_TEST_THROW");
  try {
    auto patch = accelerate::patch_environment({{"ACCEL_TEST_THROW", "1"}});
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(get_env("ACCEL_TEST_THROW"));
}

TEST(ClearEnvironment, EmptiesAndRestoresExactly) {
  ::setenv("ACCEL_TEST_FOO", "bar", 1);
  ::setenv("ACCEL_TEST_EQ", "a=b=c", 1);
  {
    auto cleared = accelerate::clear_environment();
    EXPECT_FALSE(get_env("ACCEL_TEST_FOO"));
    EXPECT_FALSE(get_env("PATH"));
    ::setenv("ACCEL_TEST_FOO", "new_bar", 1);
    ::setenv("ACCEL_TEST_LEAK", "x", 1);
    EXPECT_EQ(get_env("ACCEL_TEST_FOO"), "new_bar");
  }
  EXPECT_EQ(get_env("ACCEL_TEST_FOO"), "bar");
  EXPECT_EQ(get_env("ACCEL_TEST_EQ"), "a=b=c");
  EXPECT_FALSE(get_env("ACCEL_TEST_LEAK"));
  EXPECT_TRUE(get_env("PATH"));
}

TEST(EnvReads, FlagsAcceptTheUsualSpellings) {
  for (const char* yes : {"1", "true", "YES", "On"}) {
    auto patch = accelerate::patch_environment({{"ACCEL_TEST_FLAG", yes}});
    EXPECT_TRUE(accelerate::env_flag("ACCEL_TEST_FLAG", false)) << yes;
  }
  for (const char* no : {"0", "False", "no", "OFF"}) {
    auto patch = accelerate::patch_environment({{"ACCEL_TEST_FLAG", no}});
    EXPECT_FALSE(accelerate::env_flag("ACCEL_TEST_FLAG", true)) << no;
  }
  ::unsetenv("ACCEL_TEST_FLAG");
  EXPECT_TRUE(accelerate::env_flag("ACCEL_TEST_FLAG", true));
}

TEST(EnvReads, JunkIsAConfigErrorNamingTheVariable) {
  auto patch = accelerate::patch_environment({{"ACCEL_TEST_FLAG", "maybe"}, {"ACCEL_TEST_INT", "12abc"}});
  try {
    accelerate::env_flag("ACCEL_TEST_FLAG", false);
    FAIL() << "expected ConfigError";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("ACCEL_TEST_FLAG='maybe'"), std::string::npos) << error.what();
  }
  EXPECT_THROW(accelerate::env_int("ACCEL_TEST_INT", 0, 100), accelerate::ConfigError);
}

TEST(EnvReads, IntegersAreRangeChecked) {
  auto patch = accelerate::patch_environment({{"ACCEL_TEST_INT", "42"}});
  EXPECT_EQ(accelerate::env_int("ACCEL_TEST_INT", 0, 100), 42);
  EXPECT_THROW(accelerate::env_int("ACCEL_TEST_INT", 0, 10), accelerate::ConfigError);
}

TEST(EnvConfig, ReadsEveryAccelerateVariable) {
  auto patch = accelerate::patch_environment({{"ACCELERATE_MIXED_PRECISION", "BF16"},
                                              {"ACCELERATE_DEBUG_MODE", "1"},
                                              {"ACCELERATE_USE_CPU", "true"},
                                              {"ACCELERATE_CPU_AFFINITY", "1"},
                                              {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4"},
                                              {"ACCELERATE_LOG_LEVEL", "debug"},
                                              {"ACCELERATE_TIMEOUT", "30"},
                                              {"ACCELERATE_MPI_THREAD_LEVEL", "multiple"},
                                              {"ACCELERATE_EMULATED_RANKS_PER_NODE", "2"}});
  const auto config = accelerate::EnvConfig::from_environment();
  EXPECT_EQ(config.mixed_precision, "bf16");
  EXPECT_EQ(config.debug_mode, true);
  EXPECT_EQ(config.use_cpu, true);
  EXPECT_EQ(config.cpu_affinity, true);
  EXPECT_EQ(config.gradient_accumulation_steps, 4);
  EXPECT_EQ(config.log_level, "debug");
  EXPECT_EQ(config.timeout, std::chrono::seconds(30));
  EXPECT_EQ(config.mpi_thread_level, "multiple");
  EXPECT_EQ(config.emulated_ranks_per_node, 2);
}

TEST(EnvConfig, DefaultsWhenUnset) {
  auto cleared = accelerate::clear_environment();
  const auto config = accelerate::EnvConfig::from_environment();
  EXPECT_FALSE(config.mixed_precision);
  EXPECT_FALSE(config.debug_mode.has_value());  // unset, not false: the file may still decide
  EXPECT_FALSE(config.use_cpu.has_value());
  EXPECT_FALSE(config.cpu_affinity.has_value());
  EXPECT_FALSE(config.gradient_accumulation_steps);
  EXPECT_FALSE(config.timeout);
}

TEST(EnvConfig, RejectsUnknownMixedPrecision) {
  auto patch = accelerate::patch_environment({{"ACCELERATE_MIXED_PRECISION", "fp8"}});
  try {
    (void)accelerate::EnvConfig::from_environment();
    FAIL() << "expected ConfigError";
  } catch (const accelerate::ConfigError& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("ACCELERATE_MIXED_PRECISION"), std::string::npos) << text;
    EXPECT_NE(text.find("'bf16'"), std::string::npos) << text;
  }
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
