// The offload folder (offload_state_dict / load_offloaded_weights) and
// set_module_tensor_to_device, on the trees of module_trees.hpp: every dtype
// written and read back bit for bit, 0-d tensors, index.json merged, weights
// loaded into the module's own tensors (members and ties see them), casts,
// weights mapped from their files (copied on write, kept when the file is
// written again), and the errors for wrong names, shapes, sizes and dtypes.
// module_sizes_crosscheck checks the folder format against Accelerate's.
#include "accelerate/modeling/offload.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "accelerate/error.hpp"
#include "common/mapped_file.hpp"
#include "common/test_helpers.hpp"
#include "accelerate/modeling/module_tensors.hpp"
#include "module_trees.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {
namespace {

namespace acc = accelerate;
namespace fs = std::filesystem;
namespace trees = accelerate::testing::trees;

using acc::testing::error_of;

TEST(Offload, EveryDtypeComesBackBitForBit) {
  const std::map<std::string, at::Tensor> tensors{
      {"weight", torch::randn({4, 6})},
      {"half", torch::randn({5}).to(torch::kHalf)},
      {"bf16", torch::randn({3, 4}).to(torch::kBFloat16)},
      {"double", torch::randn({2, 2}, torch::kDouble)},
      {"ids", torch::arange(-4, 6, torch::kLong)},
      {"small", torch::arange(-3, 3, torch::kInt).to(torch::kChar)},
      {"bytes", torch::arange(7, torch::kByte)},
      {"mask", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(2.5, torch::kDouble)},
      {"empty", torch::zeros({0, 3})},
  };
  const fs::path dir = acc::testing::shared_temp_directory("offload_dtypes");
  acc::offload_state_dict(dir, tensors);
  const acc::OffloadIndex index = acc::load_offload_index(dir);
  ASSERT_EQ(index.size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    SCOPED_TRACE(name);
    EXPECT_EQ(index.at(name), (acc::OffloadedWeight{tensor.scalar_type(), tensor.sizes().vec()}));
    const at::Tensor back = acc::load_offloaded_weight(dir / (name + ".dat"), index.at(name));
    EXPECT_EQ(back.scalar_type(), tensor.scalar_type());
    EXPECT_EQ(back.sizes(), tensor.sizes());
    EXPECT_TRUE(torch::equal(back, tensor));
  }
  EXPECT_EQ(fs::file_size(dir / "scalar.dat"), 8U);  // a 0-d tensor is one element on disk

  // A second offload into the folder adds to its index.
  acc::offload_state_dict(dir, {{"later", torch::ones({2})}});
  EXPECT_EQ(acc::load_offload_index(dir).size(), tensors.size() + 1);
  acc::testing::remove_shared_directory(dir);
}

TEST(Offload, AMappedWeightReadsItsFileAndNeverWritesIt) {
  const fs::path dir = acc::testing::shared_temp_directory("offload_mapped");
  const at::Tensor original = torch::randn({256, 300});
  acc::OffloadIndex index;
  acc::offload_weight(original, "w", dir, &index);
  const fs::path file = fs::canonical(dir / "w.dat");

  at::Tensor mapped = acc::map_offloaded_weight(file, index.at("w"));
  EXPECT_TRUE(torch::equal(mapped, original));
  EXPECT_EQ(acc::testing::mapped_file_of(mapped.data_ptr()), file.string());
  // Changed in memory only: the file still holds the original.
  mapped.add_(1);
  EXPECT_TRUE(torch::equal(mapped, original + 1));
  EXPECT_TRUE(torch::equal(acc::load_offloaded_weight(file, index.at("w")), original));
  // The file written again, from the mapped tensor itself: the new file
  // replaces the old one, which the mapping keeps, so nothing faults.
  acc::offload_weight(mapped, "w", dir, &index);
  EXPECT_TRUE(torch::equal(mapped, original + 1));
  EXPECT_EQ(acc::testing::mapped_file_of(mapped.data_ptr()), file.string() + " (deleted)");
  EXPECT_TRUE(torch::equal(acc::load_offloaded_weight(file, index.at("w")), original + 1));
  EXPECT_TRUE(fs::is_regular_file(file) && std::distance(fs::directory_iterator(dir), {}) == 1);  // no staged file left
  // An empty tensor maps nothing; a wrong size is refused as on load.
  acc::offload_weight(torch::zeros({0, 3}), "empty", dir, &index);
  EXPECT_EQ(acc::map_offloaded_weight(dir / "empty.dat", index.at("empty")).sizes(), (at::IntArrayRef{0, 3}));
  const std::string message = error_of<acc::ConfigError>([&] {
    (void)acc::map_offloaded_weight(file, {torch::kFloat, {256, 301}});
  });
  EXPECT_NE(message.find("index.json's dtype and shape say"), std::string::npos) << message;
  acc::testing::remove_shared_directory(dir);
}

TEST(Offload, WeightsLoadIntoTheModulesOwnTensors) {
  const auto lm = std::dynamic_pointer_cast<trees::LmImpl>(trees::all().at("lm"));
  const fs::path dir = acc::testing::shared_temp_directory("offload_model");
  std::map<std::string, at::Tensor> state;
  for (const auto& item : lm->named_parameters()) state[item.key()] = item.value().detach().clone() + 1;
  state.erase("head.weight");  // the embedding's, under its first name
  acc::offload_state_dict(dir, state);

  const auto member = lm->embed->weight;  // the member field, a handle on the same tensor
  acc::load_offloaded_weights(*lm, acc::load_offload_index(dir), dir);
  EXPECT_TRUE(torch::equal(lm->embed->weight, state.at("embed.weight")));
  EXPECT_TRUE(torch::equal(member, state.at("embed.weight")));
  EXPECT_TRUE(lm->head->weight.is_same(lm->embed->weight));  // still tied
  EXPECT_TRUE(lm->embed->weight.requires_grad());
  EXPECT_TRUE(torch::equal(lm->layers->named_parameters()["3.proj.bias"], state.at("layers.3.proj.bias")));
  acc::testing::remove_shared_directory(dir);
}

TEST(Offload, BadFoldersAreRefusedWithTheReason) {
  const fs::path dir = acc::testing::shared_temp_directory("offload_bad");
  EXPECT_NE(error_of([&] { acc::offload_weight(torch::ones({1}), "../escape", dir); }).find("cannot name a file"),
            std::string::npos);
  acc::offload_state_dict(dir, {{"w", torch::ones({3})}});
  EXPECT_NE(error_of([&] {
              (void)acc::load_offloaded_weight(dir / "w.dat", {c10::ScalarType::Float, {4}});
            }).find("holds 12 bytes; index.json's dtype and shape say 16"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)acc::load_offloaded_weight(dir / "none.dat", {c10::ScalarType::Float, {1}});
            }).find("cannot read"),
            std::string::npos);
  std::ofstream(dir / "index.json") << R"({"w": {"dtype": "float8", "shape": [3]}})";
  EXPECT_NE(error_of([&] { (void)acc::load_offload_index(dir); }).find("unknown dtype 'float8'"), std::string::npos);
  acc::testing::remove_shared_directory(dir);
}

TEST(ModuleTensors, SetAModulesTensorInPlace) {
  const auto block = std::dynamic_pointer_cast<trees::BlockImpl>(trees::all().at("nested")->children().front());
  ASSERT_TRUE(block);
  // A value is cast to the tensor's dtype and becomes the member's data.
  acc::set_module_tensor_to_device(*block, "proj.weight", at::kCPU, torch::ones({6, 6}, torch::kDouble));
  EXPECT_EQ(block->proj->weight.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(block->proj->weight, torch::ones({6, 6})));
  EXPECT_TRUE(block->proj->weight.requires_grad());
  // dtype casts floating-point tensors only, with or without a value.
  acc::set_module_tensor_to_device(*block, "proj.bias", at::kCPU, std::nullopt, torch::kBFloat16);
  EXPECT_EQ(block->proj->bias.scalar_type(), torch::kBFloat16);
  acc::set_module_tensor_to_device(*block, "positions", at::kCPU, std::nullopt, torch::kBFloat16);
  EXPECT_EQ(block->positions.scalar_type(), torch::kLong);
  // Ties: setting the embedding's weight sets the head's, the same tensor.
  const auto lm = std::dynamic_pointer_cast<trees::LmImpl>(trees::all().at("lm"));
  acc::set_module_tensor_to_device(*lm, "embed.weight", at::kCPU, torch::zeros({40, 8}));
  EXPECT_TRUE(torch::equal(lm->head->weight, torch::zeros({40, 8})));

  EXPECT_NE(error_of([&] {
              acc::set_module_tensor_to_device(*block, "proj.weight", at::kCPU, torch::ones({6}));
            }).find("the value has shape [6], the tensor [6, 6]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              acc::set_module_tensor_to_device(*block, "proj.scale", at::kCPU);
            }).find("'proj' has no parameter or buffer named 'scale'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              acc::set_module_tensor_to_device(*block, "nope.weight", at::kCPU);
            }).find("no submodule 'nope'"),
            std::string::npos);
  // To the meta device and back: the member follows; back needs a value.
  acc::set_module_tensor_to_device(*block, "proj.weight", at::kMeta);
  EXPECT_TRUE(block->proj->weight.is_meta());
  EXPECT_NE(error_of([&] { acc::set_module_tensor_to_device(*block, "proj.weight", at::kCPU); }).find("meta device"),
            std::string::npos);
  acc::set_module_tensor_to_device(*block, "proj.weight", at::kCPU, torch::ones({6, 6}));
  EXPECT_TRUE(torch::equal(block->proj->weight, torch::ones({6, 6})));
}

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
