// Version comparison, torch version, and feature probes against config.hpp.
#include <gtest/gtest.h>
#include <torch/version.h>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/availability.hpp"
#include "accelerate/runtime/build_info.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

TEST(Versions, CompareComponentWise) {
  using accelerate::compare_versions;
  EXPECT_TRUE(compare_versions("1.13.0", "<", "2.0"));
  EXPECT_TRUE(compare_versions("1.13.0", ">", "1.9.9"));  // numeric, not lexicographic
  EXPECT_TRUE(compare_versions("2.1", "==", "2.1.0"));
  EXPECT_TRUE(compare_versions("2.1.0a0+git123", "==", "2.1.0"));
  EXPECT_TRUE(compare_versions("2.1.0", ">=", "2.1"));
  EXPECT_FALSE(compare_versions("2.1.0", "!=", "2.1"));
  EXPECT_TRUE(compare_versions("2.1.1", "<=", "2.2"));
}

TEST(Versions, BadInputIsAConfigError) {
  EXPECT_THROW(accelerate::compare_versions("1.0", "=>", "1.0"), accelerate::ConfigError);
  EXPECT_THROW(accelerate::compare_versions("abc", "<", "1.0"), accelerate::ConfigError);
}

TEST(Versions, TorchVersionIsTheOneCompiledAgainst) {
  const std::string expected = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) +
                               "." + std::to_string(TORCH_VERSION_PATCH);
  EXPECT_EQ(accelerate::torch_version(), expected);
  EXPECT_TRUE(accelerate::is_torch_version("==", expected));
  EXPECT_TRUE(accelerate::is_torch_version(">=", "1.13"));
  EXPECT_FALSE(accelerate::is_torch_version("<", "1.0"));
}

TEST(Availability, FeatureProbesFollowTheBuild) {
  EXPECT_EQ(accelerate::is_nccl_available(), accelerate::config::has_nccl);
  EXPECT_EQ(accelerate::is_hdf5_parallel(), accelerate::config::has_hdf5);
  EXPECT_EQ(accelerate::is_kokkos_available(), accelerate::config::has_kokkos);
  EXPECT_EQ(accelerate::is_hwloc_available(), accelerate::config::has_hwloc);
  if (!accelerate::config::torch_has_cuda) EXPECT_FALSE(accelerate::is_cuda_available());
  if (!accelerate::is_cuda_available()) EXPECT_TRUE(accelerate::is_bf16_available());
}

TEST(BuildInfo, ListsEveryComponentWithItsState) {
  const auto components = accelerate::build_components();
  auto find = [&](const std::string& name) {
    for (const auto& c : components) {
      if (c.name == name) return c;
    }
    ADD_FAILURE() << "component " << name << " missing";
    return accelerate::ComponentInfo{};
  };
  EXPECT_EQ(find("Accelerate-HPC").version, ACCELERATE_VERSION_STRING);
  EXPECT_EQ(find("LibTorch").version, accelerate::torch_version());
  EXPECT_FALSE(find("MPI").version.empty());
  EXPECT_EQ(find("NCCL").enabled, accelerate::config::has_nccl);
  EXPECT_EQ(find("HDF5").enabled, accelerate::config::has_hdf5);
  EXPECT_EQ(find("CUDA").enabled, accelerate::config::has_cuda);
  EXPECT_EQ(find("Kokkos").enabled, accelerate::config::has_kokkos);
  EXPECT_EQ(find("hwloc").enabled, accelerate::config::has_hwloc);
  if (accelerate::config::has_nccl) EXPECT_EQ(find("NCCL").version.rfind("2.", 0), 0U);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
