// load_checkpoint_in_model into a module (modeling/load_checkpoint.hpp), from
// safetensors files written here: a bf16 file into an fp32 model and the
// other way (dtype), a device map that sends a block to the disk (offload
// folder written, then loaded back), sharded files, strict and non-strict
// key checks, and the errors. Ties and member fields follow every load.
#include "accelerate/modeling/load_checkpoint.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "accelerate/checkpoint/safetensors.hpp"
#include "accelerate/error.hpp"
#include "accelerate/modeling/offload.hpp"
#include "common/mapped_file.hpp"
#include "common/test_helpers.hpp"
#include "module_trees.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {
namespace {

namespace acc = accelerate;
namespace fs = std::filesystem;
namespace trees = accelerate::testing::trees;
using acc::testing::error_of;

// A parameter or buffer by its full name.
at::Tensor tensor_named(const torch::nn::Module& model, const std::string& name) {
  const auto params = model.named_parameters();
  return params.contains(name) ? params[name] : model.named_buffers()[name];
}

std::shared_ptr<trees::LmImpl> lm() { return std::dynamic_pointer_cast<trees::LmImpl>(trees::all().at("lm")); }

// The LM's tensors under their first names, changed so that a load shows,
// floating-point ones in `dtype`.
std::vector<std::pair<std::string, at::Tensor>> saved_state(const torch::nn::Module& model, c10::ScalarType dtype) {
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (const auto& item : model.named_parameters()) {
    if (item.key() == "head.weight") continue;  // the embedding's weight, tied
    state.emplace_back(item.key(), (item.value().detach() * 2 + 1).to(dtype));
  }
  for (const auto& item : model.named_buffers()) state.emplace_back(item.key(), item.value().detach() + 3);
  return state;
}

TEST(LoadCheckpoint, ABf16FileIntoAnFp32ModelAndBack) {
  const auto source = lm();
  const auto state = saved_state(*source, torch::kBFloat16);
  const fs::path file = acc::testing::shared_temp_directory("load_bf16") / "model.safetensors";
  acc::checkpoint::save_safetensors(state, file);

  // Without a dtype the model keeps fp32, with the file's values.
  auto model = lm();
  const auto member = model->embed->weight;
  const auto report = acc::load_checkpoint_in_model(*model, file);
  EXPECT_TRUE(report.empty()) << report.to_string();
  for (const auto& [name, tensor] : state) {
    SCOPED_TRACE(name);
    const at::Tensor loaded = tensor_named(*model, name);
    EXPECT_EQ(loaded.scalar_type(), name.ends_with("positions") ? torch::kLong : torch::kFloat);
    EXPECT_TRUE(torch::equal(loaded, tensor.to(loaded.scalar_type())));
  }
  EXPECT_TRUE(torch::equal(member, model->embed->weight));         // the member field followed
  EXPECT_TRUE(model->head->weight.is_same(model->embed->weight));  // and the tie
  // With dtype bf16 the model's floating-point tensors become bf16; integers stay.
  auto in_bf16 = lm();
  acc::LoadCheckpointOptions options;
  options.dtype = torch::kBFloat16;
  (void)acc::load_checkpoint_in_model(*in_bf16, file, options);
  EXPECT_EQ(in_bf16->embed->weight.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(in_bf16->head->weight.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(in_bf16->layers->named_buffers()["0.positions"].scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(in_bf16->embed->weight, state.front().second));
  // Sent to the disk, a tensor is written in the dtype the model's takes
  // (fp32 here), since the model's tensor then maps the file.
  auto offloaded = lm();
  acc::LoadCheckpointOptions to_disk;
  to_disk.device_map = acc::DeviceMap{{"", "cpu"}, {"layers.3", "disk"}};
  to_disk.offload_folder = file.parent_path() / "offload";
  (void)acc::load_checkpoint_in_model(*offloaded, file, to_disk);
  const auto index = acc::load_offload_index(*to_disk.offload_folder);
  EXPECT_EQ(index.at("layers.3.proj.weight").dtype, torch::kFloat);
  EXPECT_EQ(index.at("layers.3.positions").dtype, torch::kLong);
  acc::testing::remove_shared_directory(file.parent_path());
}

TEST(LoadCheckpoint, ADeviceMapSendsABlockToTheOffloadFolder) {
  const auto source = lm();
  const auto state = saved_state(*source, torch::kFloat);
  const fs::path dir = acc::testing::shared_temp_directory("load_sharded");
  // Shards of at most 1 KB: several files and an index.
  acc::checkpoint::save_model(state, dir / "model", {.max_shard_size = 1024});
  auto model = lm();
  acc::LoadCheckpointOptions options;
  options.device_map = acc::DeviceMap{{"", "cpu"}, {"layers.3", "disk"}};
  options.offload_folder = dir / "offload";
  EXPECT_TRUE(acc::load_checkpoint_in_model(*model, dir / "model", options).empty());
  // The block's tensors went to the folder, and the model's tensors map
  // their files; every other tensor was loaded into the model's memory.
  const auto index = acc::load_offload_index(dir / "offload");
  EXPECT_EQ(index.size(), 6U);  // proj weight and bias, norm weight and bias, scale, positions
  for (const auto& [name, tensor] : state) {
    SCOPED_TRACE(name);
    const at::Tensor loaded = tensor_named(*model, name);
    EXPECT_TRUE(torch::equal(loaded, tensor));
    const std::string mapped = acc::testing::mapped_file_of(loaded.data_ptr());
    if (name.starts_with("layers.3.")) {
      EXPECT_EQ(index.count(name), 1U);
      EXPECT_EQ(mapped, fs::canonical(dir / "offload" / (name + ".dat")).string());
    } else {
      EXPECT_EQ(mapped.find("offload"), std::string::npos) << mapped;
    }
  }
  // Brought back from the folder, they hold the checkpoint's values.
  acc::load_offloaded_weights(*model, index, dir / "offload");
  for (const auto& [name, tensor] : state) EXPECT_TRUE(torch::equal(tensor_named(*model, name), tensor)) << name;
  // The disk without a folder for it is refused before anything is read.
  options.offload_folder.reset();
  EXPECT_NE(error_of([&] {
              (void)acc::load_checkpoint_in_model(*model, dir / "model", options);
            }).find("give an offload_folder"),
            std::string::npos);
  acc::testing::remove_shared_directory(dir);
}

TEST(LoadCheckpoint, StrictLoadingNamesEveryMissingAndUnexpectedTensor) {
  auto state = saved_state(*lm(), torch::kFloat);
  state.erase(state.begin());  // embed.weight
  state.emplace_back("extra.weight", torch::ones({2}));
  const fs::path file = acc::testing::shared_temp_directory("load_strict") / "model.safetensors";
  acc::checkpoint::save_safetensors(state, file);
  auto model = lm();
  const auto report = acc::load_checkpoint_in_model(*model, file);
  EXPECT_EQ(report.missing, std::vector<std::string>{"embed.weight"});
  EXPECT_EQ(report.unexpected, std::vector<std::string>{"extra.weight"});
  const std::map<std::string, at::Tensor> expected(state.begin(), state.end());
  EXPECT_TRUE(torch::equal(model->norm->weight, expected.at("norm.weight")));  // the matching ones are loaded
  acc::LoadCheckpointOptions strict;
  strict.strict = true;
  const auto message = error_of([&] { (void)acc::load_checkpoint_in_model(*lm(), file, strict); });
  EXPECT_NE(message.find("embed.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("extra.weight"), std::string::npos) << message;

  // A tensor of another shape is refused.
  acc::checkpoint::save_safetensors({{"norm.weight", torch::ones({3})}}, file);
  EXPECT_NE(error_of([&] { (void)acc::load_checkpoint_in_model(*lm(), file); }).find("the value has shape [3]"),
            std::string::npos);
  acc::testing::remove_shared_directory(file.parent_path());
}

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
