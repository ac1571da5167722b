// save_model / load_checkpoint_in_model: safetensors files written and read
// back (single file, shards + index, folder), byte layout of the header, and
// strict / non-strict key reports.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>

#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/checkpoint/safetensors.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace ckpt = accelerate::checkpoint;
namespace fs = std::filesystem;
using accelerate::testing::error_of;

namespace {

std::vector<std::pair<std::string, at::Tensor>> model() {
  return {{"fc.weight", at::arange(12, at::kFloat).reshape({3, 4})},
          {"fc.bias", at::arange(3, at::kBFloat16)},
          {"norm.running_mean", at::arange(5, at::kDouble)},
          {"norm.num_batches_tracked", at::full({}, 7, at::kLong)},
          {"mask", at::arange(3, at::kLong).remainder(2).eq(0)},
          {"half", at::arange(4, at::kHalf)}};
}

std::map<std::string, at::Tensor> zeros_like_model() {
  std::map<std::string, at::Tensor> result;
  for (const auto& [name, tensor] : model()) result[name] = at::zeros_like(tensor);
  return result;
}

void expect_model(const std::map<std::string, at::Tensor>& loaded) {
  for (const auto& [name, tensor] : model()) EXPECT_TRUE(at::equal(loaded.at(name), tensor)) << name;
}

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("accelerate_safetensors_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(Safetensors, SingleFileRoundTripAndHeaderLayout) {
  const auto files = ckpt::save_model(model(), dir_ / "single");
  ASSERT_EQ(files, std::vector<fs::path>{dir_ / "single" / ckpt::SAFE_WEIGHTS_NAME});
  std::ifstream in(files[0], std::ios::binary);
  unsigned char prefix[8];
  in.read(reinterpret_cast<char*>(prefix), 8);
  std::uint64_t length = 0;
  for (int b = 7; b >= 0; --b) length = (length << 8) | prefix[b];
  EXPECT_EQ(length % 8, 0U);
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  EXPECT_NE(header.find(R"("fc.bias":{"data_offsets":[)"), std::string::npos) << header;
  EXPECT_NE(header.find(R"("dtype":"BF16")"), std::string::npos) << header;
  EXPECT_NE(header.find(R"("__metadata__":{"format":"pt"})"), std::string::npos) << header;
  expect_model(ckpt::load_safetensors(files[0]));

  auto destination = zeros_like_model();
  EXPECT_TRUE(ckpt::load_checkpoint_in_model(destination, dir_ / "single", true).empty());
  expect_model(destination);
}

TEST_F(Safetensors, ShardsWithIndexLoadFromIndexOrFolder) {
  const auto files = ckpt::save_model(model(), dir_ / "sharded", {.max_shard_size = 40});
  ASSERT_GT(files.size(), 2U);
  EXPECT_EQ(files.back().filename(), ckpt::SAFE_WEIGHTS_INDEX_NAME);
  EXPECT_EQ(files.front().filename(), "model-00001-of-0000" + std::to_string(files.size() - 1) + ".safetensors");
  for (const fs::path& source : {dir_ / "sharded", dir_ / "sharded" / std::string(ckpt::SAFE_WEIGHTS_INDEX_NAME)}) {
    auto destination = zeros_like_model();
    EXPECT_TRUE(ckpt::load_checkpoint_in_model(destination, source, true).empty()) << source;
    expect_model(destination);
  }
}

TEST_F(Safetensors, StrictListsEveryKeyProblemNonStrictLoadsTheRest) {
  ckpt::save_model(model(), dir_);
  auto destination = zeros_like_model();
  destination.erase("mask");
  destination["extra"] = at::zeros({1});
  destination["fc.weight"] = at::zeros({4, 3});
  const std::string message =
      error_of([&] { ckpt::load_checkpoint_in_model(destination, dir_ / ckpt::SAFE_WEIGHTS_NAME, true); });
  for (const char* key : {"mask", "extra", "fc.weight", "[4, 3]"}) {
    EXPECT_NE(message.find(key), std::string::npos) << key << ": " << message;
  }
  const auto report = ckpt::load_checkpoint_in_model(destination, dir_, false);
  EXPECT_EQ(report.missing, std::vector<std::string>{"extra"});
  EXPECT_EQ(report.unexpected, std::vector<std::string>{"mask"});
  ASSERT_EQ(report.mismatched.size(), 1U);
  EXPECT_TRUE(at::equal(destination["fc.bias"], at::arange(3, at::kBFloat16)));
  EXPECT_EQ(destination["fc.weight"].abs().sum().item<float>(), 0.0f);
}

TEST_F(Safetensors, RejectsWhatItCannotWriteOrRead) {
  EXPECT_NE(error_of([&] { ckpt::save_model(model(), dir_, {.safe_serialization = false}); })
                .find("safe_serialization=false"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ckpt::save_model({{"z", at::zeros({2}, at::TensorOptions().dtype(at::kComplexFloat))}}, dir_);
            }).find("'z'"),
            std::string::npos);
  fs::create_directories(dir_);
  std::ofstream(dir_ / "junk.safetensors") << "not a safetensors file";
  EXPECT_NE(error_of([&] { ckpt::load_safetensors(dir_ / "junk.safetensors"); }).find("junk.safetensors"),
            std::string::npos);
  // An index may not send the loader outside its directory.
  std::ofstream(dir_ / "escape.index.json") << R"({"weight_map": {"a": "../outside.safetensors"}})";
  EXPECT_NE(error_of([&] { ckpt::load_checkpoint_in_model({}, dir_ / "escape.index.json", false); })
                .find("outside the index's directory"),
            std::string::npos);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
