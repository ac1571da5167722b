// PaddingCollate: token samples (maps of tensors) padded along their first
// dimension to the longest of the batch, with each key's pad value, on the
// right or the left; equal shapes stacked as DefaultCollate stacks them; and
// samples that cannot be padded named with their key.
#include "accelerate/data/padding_collate.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "accelerate/data/collate.hpp"
#include "accelerate/error.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::PaddingCollate;
using accelerate::PaddingSide;
using TensorMap = std::map<std::string, torch::Tensor>;

TensorMap tokens(std::vector<std::int64_t> ids) {
  const torch::Tensor t = torch::tensor(ids, torch::kInt64);
  return {{"input_ids", t},
          {"attention_mask", torch::ones_like(t)},
          {"labels", t + 100},
          {"score", torch::tensor(static_cast<float>(ids.size()))}};
}

torch::Tensor rows(std::vector<std::vector<std::int64_t>> values) {
  std::vector<torch::Tensor> list;
  for (const auto& row : values) list.push_back(torch::tensor(row, torch::kInt64));
  return torch::stack(list);
}

void expect_equal(const torch::Tensor& got, const torch::Tensor& want) {
  EXPECT_EQ(got.scalar_type(), want.scalar_type());
  EXPECT_TRUE(torch::equal(got, want)) << got << "\nexpected\n" << want;
}

TEST(PaddingCollate, PadsEveryKeyToTheLongestWithItsPadValueOnTheRight) {
  const PaddingCollate pad({.pad_values = {{"labels", -100}}});
  const TensorMap batch = pad({tokens({5, 6}), tokens({7, 8, 9, 10}), tokens({11})});
  ASSERT_EQ(batch.size(), 4U);
  expect_equal(batch.at("input_ids"), rows({{5, 6, 0, 0}, {7, 8, 9, 10}, {11, 0, 0, 0}}));
  expect_equal(batch.at("attention_mask"), rows({{1, 1, 0, 0}, {1, 1, 1, 1}, {1, 0, 0, 0}}));
  expect_equal(batch.at("labels"), rows({{105, 106, -100, -100}, {107, 108, 109, 110}, {111, -100, -100, -100}}));
  // 0-d values are stacked.
  expect_equal(batch.at("score"), torch::tensor({2.0F, 4.0F, 1.0F}));
  EXPECT_EQ(pad.pad_value("labels"), -100);
  EXPECT_EQ(pad.pad_value("input_ids"), 0);
}

TEST(PaddingCollate, PadsOnTheLeftAndWithTheDefaultValue) {
  const PaddingCollate pad(
      {.pad_values = {{"labels", -100}}, .default_pad_value = 3, .padding_side = PaddingSide::left});
  const TensorMap batch = pad({tokens({5, 6}), tokens({7, 8, 9})});
  expect_equal(batch.at("input_ids"), rows({{3, 5, 6}, {7, 8, 9}}));
  expect_equal(batch.at("attention_mask"), rows({{3, 1, 1}, {1, 1, 1}}));
  expect_equal(batch.at("labels"), rows({{-100, 105, 106}, {107, 108, 109}}));
}

TEST(PaddingCollate, EqualShapesStackAsTheDefaultCollateDoes) {
  std::vector<TensorMap> samples{tokens({1, 2}), tokens({3, 4}), tokens({5, 6})};
  const TensorMap padded = PaddingCollate()(samples);
  const TensorMap stacked = accelerate::DefaultCollate{}(samples);
  ASSERT_EQ(padded.size(), stacked.size());
  for (const auto& [key, value] : stacked) expect_equal(padded.at(key), value);
}

TEST(PaddingCollate, PadsTheFirstDimensionOfValuesWithMore) {
  TensorMap a{{"features", torch::ones({1, 2})}};
  TensorMap b{{"features", torch::full({3, 2}, 2.0)}};
  const TensorMap batch = PaddingCollate({.default_pad_value = -1})({a, b});
  const torch::Tensor want =
      torch::stack({torch::cat({torch::ones({1, 2}), torch::full({2, 2}, -1.0)}), torch::full({3, 2}, 2.0)});
  expect_equal(batch.at("features"), want);
}

TEST(PaddingCollate, SamplesThatCannotBePaddedAreNamed) {
  auto message = [](std::vector<TensorMap> samples) {
    try {
      (void)PaddingCollate()(std::move(samples));
    } catch (const accelerate::ConfigError& error) {
      return std::string(error.what());
    }
    return std::string("<no exception>");
  };
  const std::string keys = message({{{"a", torch::zeros({1})}}, {{"b", torch::zeros({1})}}});
  EXPECT_NE(keys.find("sample 1 of the batch has keys 'b', but sample 0 has keys 'a'"), std::string::npos) << keys;
  const std::string dtype = message({{{"ids", torch::zeros({2}, torch::kLong)}}, {{"ids", torch::zeros({3})}}});
  EXPECT_NE(dtype.find("sample 1 of the batch has ['ids'] [3] Float, but sample 0 has [2] Long"), std::string::npos)
      << dtype;
  const std::string inner = message({{{"f", torch::zeros({2, 4})}}, {{"f", torch::zeros({3, 5})}}});
  EXPECT_NE(inner.find("sample 1 of the batch has ['f'] [3, 5] Float, but sample 0 has [2, 4] Float"),
            std::string::npos)
      << inner;
  EXPECT_NE(message({}).find("at least one sample"), std::string::npos);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
