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
  EXPECT_NE(error_of([&] {
              ckpt::save_model(model(), dir_, {.safe_serialization = false});
            }).find("safe_serialization=false"),
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
  EXPECT_NE(error_of([&] {
              ckpt::load_checkpoint_in_model({}, dir_ / "escape.index.json", false);
            }).find("outside the index's directory"),
            std::string::npos);
}

// A safetensors file written by hand: the 8-byte length, `header` padded with
// blanks to 8 bytes (as the writers do), then `data_bytes` bytes of data.
void write_raw(const fs::path& file, std::string header, std::size_t data_bytes) {
  fs::create_directories(file.parent_path());
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (std::size_t b = 0; b < 8; ++b) bytes[b] = static_cast<char>((header.size() >> (8 * b)) & 0xFF);
  bytes += header;
  for (std::size_t i = 0; i < data_bytes; ++i) bytes += static_cast<char>(i + 1);
  std::ofstream(file, std::ios::binary) << bytes;
}

// The message load_safetensors gives for that file; every one must name the file.
std::string load_error(const fs::path& file, const std::string& header, std::size_t data_bytes) {
  write_raw(file, header, data_bytes);
  const std::string message = error_of([&] { ckpt::load_safetensors(file); });
  EXPECT_NE(message.find("'" + file.string() + "'"), std::string::npos) << message;
  return message;
}

std::string u8_entry(const std::string& name, int begin, int end) {
  return "\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(end - begin) + "],\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

constexpr const char* kTilingRule = "sorted by offset, to fill the data from byte 0 to its end";

TEST_F(Safetensors, RefusesOverlappingTensors) {
  const std::string message =
      load_error(dir_ / "overlap.safetensors", "{" + u8_entry("a", 0, 4) + "," + u8_entry("b", 2, 6) + "}", 6);
  EXPECT_NE(message.find("tensor 'b' at data offsets [2, 6) overlaps tensor 'a' at [0, 4)"), std::string::npos)
      << message;
  EXPECT_NE(message.find(kTilingRule), std::string::npos) << message;
}

TEST_F(Safetensors, RefusesAGapBeforeTheFirstTensor) {
  const std::string message = load_error(dir_ / "gap_before.safetensors", "{" + u8_entry("a", 4, 8) + "}", 8);
  EXPECT_NE(message.find("tensor 'a' starts at byte 4 of the data, but it is the first by offset"), std::string::npos)
      << message;
  EXPECT_NE(message.find("4 bytes belong to no tensor"), std::string::npos) << message;
  EXPECT_NE(message.find(kTilingRule), std::string::npos) << message;
}

TEST_F(Safetensors, RefusesAGapBetweenTensors) {
  const std::string message =
      load_error(dir_ / "gap_between.safetensors", "{" + u8_entry("a", 0, 2) + "," + u8_entry("b", 4, 8) + "}", 8);
  EXPECT_NE(message.find("tensor 'b' starts at byte 4 of the data, but the tensor before it ('a') ends at byte 2"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(kTilingRule), std::string::npos) << message;
}

TEST_F(Safetensors, RefusesDataAfterTheLastTensor) {
  const std::string message = load_error(dir_ / "trailing.safetensors", "{" + u8_entry("a", 0, 4) + "}", 8);
  EXPECT_NE(message.find("the last tensor ('a') ends at byte 4 of the data, but the file holds 8 bytes of data"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(kTilingRule), std::string::npos) << message;
  // Data without any tensor is refused too.
  EXPECT_NE(load_error(dir_ / "no_tensor.safetensors", "{}", 8).find("the header lists no tensor"), std::string::npos);
}

TEST_F(Safetensors, RefusesMetadataThatIsNotAMapOfStrings) {
  const std::string message = load_error(dir_ / "metadata.safetensors",
                                         R"({"__metadata__":{"format":"pt","step":7},)" + u8_entry("a", 0, 4) + "}", 4);
  EXPECT_NE(message.find("the value of 'step' in \"__metadata__\" is not a string"), std::string::npos) << message;
  EXPECT_NE(message.find("map strings to strings"), std::string::npos) << message;
  const std::string list =
      load_error(dir_ / "metadata_list.safetensors", R"({"__metadata__":["pt"],)" + u8_entry("a", 0, 4) + "}", 4);
  EXPECT_NE(list.find("\"__metadata__\" is not a JSON object"), std::string::npos) << list;
}

TEST_F(Safetensors, RefusesDuplicateTensorNames) {
  // Either entry alone would be a valid file: without the check one of them
  // would be dropped in silence.
  const std::string message =
      load_error(dir_ / "duplicate.safetensors", "{" + u8_entry("a", 0, 4) + "," + u8_entry("a", 0, 4) + "}", 4);
  EXPECT_NE(message.find("the header names 'a' twice"), std::string::npos) << message;
  EXPECT_NE(message.find("every tensor name"), std::string::npos) << message;
}

TEST_F(Safetensors, AcceptsEveryLayoutTheFormatAllows) {
  // Header order is not offset order; empty tensors sit anywhere, also at the end;
  // metadata may be empty; a file may hold no tensor and no data.
  write_raw(dir_ / "ok.safetensors",
            R"({"__metadata__":{},"a":{"dtype":"U8","shape":[0],"data_offsets":[6,6]},)" + u8_entry("b", 2, 6) + "," +
                u8_entry("c", 0, 2) + R"(,"d":{"dtype":"F32","shape":[2,0],"data_offsets":[0,0]}})",
            6);
  const auto loaded = ckpt::load_safetensors(dir_ / "ok.safetensors");
  ASSERT_EQ(loaded.size(), 4U);
  EXPECT_TRUE(at::equal(loaded.at("b"), at::arange(3, 7, at::kByte)));
  EXPECT_TRUE(at::equal(loaded.at("c"), at::arange(1, 3, at::kByte)));
  EXPECT_EQ(loaded.at("a").numel(), 0);
  EXPECT_EQ(loaded.at("d").sizes(), (std::vector<std::int64_t>{2, 0}));
  write_raw(dir_ / "empty.safetensors", "{}", 0);
  EXPECT_TRUE(ckpt::load_safetensors(dir_ / "empty.safetensors").empty());
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
