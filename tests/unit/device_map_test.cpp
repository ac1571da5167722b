// Device maps on the trees of module_trees.hpp, worked out by hand: the main
// device's reserve for the largest layer, ties kept together, every tensor
// covered (a split module's own buffers included), a module registered under
// two names, balanced budgets, sizes written with units, and the errors for
// budgets and maps that name no device or miss a tensor.
// module_sizes_crosscheck compares the same functions with Accelerate's own.
#include "accelerate/modeling/device_map.hpp"

#include <gtest/gtest.h>

#include "accelerate/error.hpp"
#include "common/test_helpers.hpp"
#include "accelerate/modeling/module_sizes.hpp"
#include "module_trees.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {
namespace {

namespace acc = accelerate;
namespace trees = accelerate::testing::trees;

using acc::testing::error_of;

TEST(DeviceMap, GpuZeroKeepsRoomForTheLargestLayer) {
  // The MLP's layers take 416, 280 and 72 bytes. GPU 0 keeps room for the
  // largest layer still to be placed (280, for an offloaded layer to come
  // back to), so the first layer does not fit its 500 and goes to GPU 1,
  // which takes the second too; the third is left for the CPU.
  const auto mlp = trees::all().at("mlp");
  const acc::DeviceMap expected{{"0", "1"}, {"1", "1"}, {"2", "1"}, {"3", "1"}, {"4", "cpu"}};
  EXPECT_EQ(acc::infer_auto_device_map(*mlp, acc::MaxMemory{{"0", 500}, {"1", 700}, {"cpu", 1000}}), expected);
  // With 700, GPU 0 takes the first layer (416 + 280 in reserve fit), not the second.
  const acc::DeviceMap roomier{{"0", "0"}, {"1", "0"}, {"2", "1"}, {"3", "1"}, {"4", "1"}};
  EXPECT_EQ(acc::infer_auto_device_map(*mlp, acc::MaxMemory{{"0", 700}, {"1", 700}, {"cpu", 1000}}), roomier);
  // Where it all fits, one entry: the whole model on GPU 0.
  EXPECT_EQ(acc::infer_auto_device_map(*mlp, acc::MaxMemory{{"0", 2000}}), (acc::DeviceMap{{"", "0"}}));
  // Without a CPU budget, what does not fit goes to the disk.
  const auto spilled = acc::infer_auto_device_map(*mlp, acc::MaxMemory{{"0", 500}});
  EXPECT_EQ(acc::device_of(spilled, "4.weight"), "disk");
}

TEST(DeviceMap, TiedParametersShareADeviceAndEveryTensorIsCovered) {
  for (const auto& [name, model] : trees::all()) {
    const auto total = acc::compute_module_sizes(*model).at("");
    for (const double fraction : {0.1, 0.2, 0.3, 0.5, 0.7, 1.5}) {
      const auto part = static_cast<std::int64_t>(static_cast<double>(total) * fraction);
      for (const bool clean : {true, false}) {
        acc::PlacementOptions options;
        options.clean_result = clean;
        options.warn = [](const std::string&) {};
        const auto map =
            acc::infer_auto_device_map(*model, acc::MaxMemory{{"0", part}, {"1", part}, {"cpu", part}}, options);
        SCOPED_TRACE(name + " at " + std::to_string(fraction) + (clean ? "" : ", not cleaned"));
        EXPECT_NO_THROW(acc::check_device_map(*model, map));
        for (const auto& group : acc::find_tied_parameters(*model)) {
          for (const auto& tied : group) {
            if (tied.rfind("block_again.", 0) == 0) continue;  // the same module as "block": no entry of its own
            EXPECT_EQ(acc::device_of(map, tied), acc::device_of(map, group.front()));
          }
        }
      }
    }
  }
}

TEST(DeviceMap, ASplitModulesOwnBuffersGoWithItsFirstPiece) {
  // The LM's fourth block is split between GPU 1 and the CPU; its buffers
  // (which Accelerate's map leaves without a device) go with its projection.
  const auto lm = trees::all().at("lm");
  const auto map = acc::infer_auto_device_map(*lm, acc::MaxMemory{{"0", 1568}, {"1", 1568}, {"cpu", 3136}});
  EXPECT_EQ(map.at("layers.3.proj"), "1");
  EXPECT_EQ(map.at("layers.3.norm"), "cpu");
  EXPECT_EQ(map.at("layers.3.scale"), "1");
  EXPECT_EQ(map.at("layers.3.positions"), "1");
  EXPECT_EQ(map.at("embed"), map.at("head"));
}

TEST(DeviceMap, BalancedBudgetsSpreadTheModel) {
  const auto mlp = trees::all().at("mlp");
  // 768 bytes over 2 GPUs is 384 each, plus 1.25 x the mean leaf module
  // (768 / 3 = 256): 704 for GPU 0; the last GPU and the CPU keep their budget.
  const acc::MaxMemory budget{{"0", 10000}, {"1", 10000}, {"cpu", 10000}};
  EXPECT_EQ(acc::get_balanced_memory(*mlp, budget), (acc::MaxMemory{{"0", 704}, {"1", 10000}, {"cpu", 10000}}));
  acc::PlacementOptions low_zero;
  low_zero.low_zero = true;  // GPU 1 can hold it all: nothing is left for GPU 0
  EXPECT_EQ(acc::get_balanced_memory(*mlp, budget, low_zero), (acc::MaxMemory{{"0", 0}, {"1", 10000}, {"cpu", 10000}}));
  // No GPU: nothing to balance.
  EXPECT_EQ(acc::get_balanced_memory(*mlp, acc::MaxMemory{{"cpu", 5}}), (acc::MaxMemory{{"cpu", 5}}));
}

TEST(DeviceMap, AModuleRegisteredTwiceIsPlacedOnce) {
  // "block_again" is "block": it gets no entry of its own, and its tensors
  // count as covered through "block".
  const auto tied = trees::all().at("tied");
  const auto map = acc::infer_auto_device_map(*tied, acc::MaxMemory{{"0", 200}, {"1", 200}, {"cpu", 2000}});
  EXPECT_NO_THROW(acc::check_device_map(*tied, map));
  for (const auto& [name, device] : map) EXPECT_NE(name.rfind("block_again", 0), 0U) << name;
}

TEST(DeviceMap, SizesWithUnits) {
  EXPECT_EQ(acc::convert_file_size_to_int("5GB"), 5'000'000'000);
  EXPECT_EQ(acc::convert_file_size_to_int("1.5GiB"), 1'610'612'736);
  EXPECT_EQ(acc::convert_file_size_to_int("500MB"), 500'000'000);
  EXPECT_EQ(acc::convert_file_size_to_int("64KiB"), 65'536);
  EXPECT_EQ(acc::convert_file_size_to_int("8Gb"), 1'000'000'000);  // bits
  EXPECT_EQ(acc::convert_file_size_to_int("123"), 123);
  for (const char* bad : {"", "GB", "5XB", "-1", "-1GB", "abc", "5 GB x"}) {
    EXPECT_NE(error_of([&] { (void)acc::convert_file_size_to_int(bad); }).find("is not a size"), std::string::npos)
        << bad;
  }
}

TEST(DeviceMap, BudgetsAndMapsNameKnownDevicesAndCoverEveryTensor) {
  EXPECT_GT(acc::get_max_memory().at("cpu"), 0);  // measured: the CPU's available memory
  EXPECT_EQ(acc::device_order(acc::MaxMemory{{"disk", 1}, {"cpu", 1}, {"10", 1}, {"2", 1}}),
            (std::vector<std::string>{"2", "10", "cpu", "disk"}));
  EXPECT_NE(error_of([] { (void)acc::get_max_memory(acc::MaxMemory{{"mps", 1}}); }).find("'mps'"), std::string::npos);
  EXPECT_NE(error_of([] {
              (void)acc::get_max_memory(acc::MaxMemory{{"0", -1}});
            }).find("0 or more"),
            std::string::npos);

  const auto mlp = trees::all().at("mlp");
  const std::string missing = error_of([&] { acc::check_device_map(*mlp, {{"0", "0"}, {"2", "cpu"}}); });
  EXPECT_NE(missing.find("2 tensor(s)"), std::string::npos) << missing;
  EXPECT_NE(missing.find("4.weight, 4.bias"), std::string::npos) << missing;
  EXPECT_NE(error_of([&] { acc::check_device_map(*mlp, {{"", "gpu0"}}); }).find("'gpu0'"), std::string::npos);

  // The longest entry that holds a name decides.
  const acc::DeviceMap map{{"", "cpu"}, {"2", "0"}, {"2.bias", "disk"}};
  EXPECT_EQ(acc::device_of(map, "0.weight"), "cpu");
  EXPECT_EQ(acc::device_of(map, "2.weight"), "0");
  EXPECT_EQ(acc::device_of(map, "2.bias"), "disk");
  EXPECT_NE(error_of([] { (void)acc::device_of({{"2", "0"}}, "20.weight"); }).find("'20.weight'"), std::string::npos);
}

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
