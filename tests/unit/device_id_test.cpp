// DeviceId: the runtime layer's device value, parsed once from its text.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "accelerate/error.hpp"
#include "accelerate/runtime/device_id.hpp"
#include "accelerate/runtime/torch_device.hpp"

namespace ACCELERATE_TEST_FILE_ID {
namespace {

using accelerate::ConfigError;
using accelerate::DeviceId;

TEST(DeviceIdText, CpuAndCudaOrdinalsAreReadAndWrittenBack) {
  EXPECT_TRUE(DeviceId("cpu").is_cpu());
  EXPECT_EQ(DeviceId("cpu").index(), -1);
  EXPECT_EQ(DeviceId(), DeviceId::cpu());
  EXPECT_EQ(DeviceId("cuda"), DeviceId::cuda(0));
  EXPECT_EQ(DeviceId("cuda:3").index(), 3);
  EXPECT_TRUE(DeviceId("cuda:3").is_cuda());
  EXPECT_EQ(DeviceId("cuda:12").str(), "cuda:12");
  EXPECT_EQ(DeviceId("cpu").str(), "cpu");
  EXPECT_NE(DeviceId("cuda:1"), DeviceId("cuda:2"));
  std::ostringstream out;
  out << DeviceId::cuda(7);
  EXPECT_EQ(out.str(), "cuda:7");
}

TEST(DeviceIdText, MalformedTextIsAConfigErrorThatNamesIt) {
  for (const std::string text : {"", "gpu", "cuda:", "cuda:-1", "cuda:1x", "cuda3", "CPU", "mps", "cuda:99999999999"}) {
    try {
      DeviceId device(text);
      ADD_FAILURE() << "'" << text << "' parsed as " << device;
    } catch (const ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find("device '" + text + "'"), std::string::npos) << error.what();
    }
  }
  EXPECT_THROW((void)DeviceId::cuda(-2), ConfigError);
}

TEST(DeviceIdText, TorchDeviceIsTheSameDevice) {
  EXPECT_EQ(accelerate::torch_device(DeviceId("cpu")), c10::Device(c10::kCPU));
  EXPECT_EQ(accelerate::torch_device(DeviceId("cuda:2")), c10::Device("cuda:2"));
  EXPECT_EQ(accelerate::torch_device(DeviceId("cuda")).index(), 0);
}

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
