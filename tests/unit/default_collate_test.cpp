// DefaultCollate against torch::stack: contiguous CPU samples are copied
// side by side without an operator call per sample, and every other kind of
// sample (strided views, autograd, lazy conjugation, dtypes or shapes that
// differ) must still give what torch::stack gives, or its error.
#include "accelerate/data/collate.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "accelerate/error.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using Samples = std::vector<torch::Tensor>;

// Sample i of `whole`, a view into its storage (as an in-memory dataset's
// get(i) returns it).
Samples rows_of(const torch::Tensor& whole) {
  Samples samples;
  for (std::int64_t i = 0; i < whole.size(0); ++i) samples.push_back(whole[i]);
  return samples;
}

void expect_same_batch(const torch::Tensor& batch, const torch::Tensor& expected) {
  ASSERT_TRUE(batch.defined());
  EXPECT_EQ(batch.scalar_type(), expected.scalar_type());
  EXPECT_EQ(batch.sizes(), expected.sizes());
  EXPECT_EQ(batch.strides(), expected.strides());
  EXPECT_EQ(batch.requires_grad(), expected.requires_grad());
  EXPECT_TRUE(torch::equal(batch.resolve_conj(), expected.resolve_conj())) << batch << "\nexpected\n" << expected;
}

TEST(DefaultCollate, ContiguousSamplesOfEveryDtypeStackAsTorchStackDoes) {
  const std::vector<torch::ScalarType> dtypes = {torch::kFloat32,  torch::kFloat64,     torch::kFloat16,
                                                 torch::kBFloat16, torch::kInt8,        torch::kUInt8,
                                                 torch::kInt16,    torch::kInt32,       torch::kInt64,
                                                 torch::kBool,     torch::kComplexFloat};
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {3}, {2, 3}, {0}};
  for (const torch::ScalarType dtype : dtypes) {
    for (const auto& shape : shapes) {
      std::vector<std::int64_t> whole_shape = {5};
      whole_shape.insert(whole_shape.end(), shape.begin(), shape.end());
      const torch::Tensor whole = (torch::arange(5 * c10::multiply_integers(shape)).reshape(whole_shape) % 7).to(dtype);
      const Samples samples = rows_of(whole);
      SCOPED_TRACE(testing::Message() << dtype << " samples of shape " << whole[0].sizes());
      expect_same_batch(accelerate::DefaultCollate{}(samples), torch::stack(samples));
      // The batch is new memory, not a view of the dataset's.
      const torch::Tensor batch = accelerate::DefaultCollate{}(samples);
      if (batch.numel() > 0) {
        EXPECT_FALSE(batch.data_ptr() == whole.data_ptr());
      }
    }
  }
}

TEST(DefaultCollate, StridedSamplesStackTheirValuesNotTheirMemory) {
  // Columns of a row-major matrix: each sample's elements are 4 apart.
  const torch::Tensor whole = torch::arange(12, torch::kFloat32).reshape({3, 4});
  Samples columns;
  for (std::int64_t j = 0; j < 4; ++j) columns.push_back(whole.select(1, j));
  ASSERT_FALSE(columns[0].is_contiguous());
  expect_same_batch(accelerate::DefaultCollate{}(columns), torch::stack(columns));
  // Transposed matrices: contiguous in no sample.
  const Samples transposed = {torch::rand({2, 3}).t(), torch::rand({2, 3}).t()};
  expect_same_batch(accelerate::DefaultCollate{}(transposed), torch::stack(transposed));
}

TEST(DefaultCollate, SamplesThatRequireGradKeepTheGraph) {
  const torch::Tensor leaf = torch::rand({3, 2}, torch::requires_grad());
  const Samples samples = rows_of(leaf * 2);
  const torch::Tensor batch = accelerate::DefaultCollate{}(samples);
  ASSERT_TRUE(batch.requires_grad());
  batch.sum().backward();
  EXPECT_TRUE(torch::equal(leaf.grad(), torch::full({3, 2}, 2.0F)));
  // Without grad mode nothing is recorded, as with torch::stack.
  const torch::NoGradGuard no_grad;
  expect_same_batch(accelerate::DefaultCollate{}(samples), torch::stack(samples));
}

TEST(DefaultCollate, LazilyConjugatedAndNegatedSamplesAreResolved) {
  const torch::Tensor whole = torch::complex(torch::rand({3, 2}), torch::rand({3, 2}));
  const Samples samples = rows_of(whole.conj());
  ASSERT_TRUE(samples[0].is_conj());
  expect_same_batch(accelerate::DefaultCollate{}(samples), torch::stack(samples));
  // A contiguous view whose values are the negatives of its memory's.
  const Samples negated = rows_of(at::_neg_view(torch::rand({3, 2})));
  ASSERT_TRUE(negated[0].is_neg() && negated[0].is_contiguous());
  expect_same_batch(accelerate::DefaultCollate{}(negated), torch::stack(negated));
}

TEST(DefaultCollate, SamplesThatDifferAreNamed) {
  const Samples shapes = {torch::zeros({2}), torch::zeros({2}), torch::zeros({3})};
  try {
    (void)accelerate::DefaultCollate{}(shapes);
    FAIL() << "samples of different shapes were stacked";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("sample 2"), std::string::npos) << error.what();
  }
  const Samples undefined = {torch::zeros({2}), torch::Tensor()};
  EXPECT_THROW((void)accelerate::DefaultCollate{}(undefined), accelerate::ConfigError);
}

TEST(DefaultCollate, ExamplesStackDataAndTargetsApart) {
  const torch::Tensor data = torch::rand({4, 3});
  const torch::Tensor targets = torch::arange(4);
  std::vector<torch::data::Example<>> examples;
  for (std::int64_t i = 0; i < 4; ++i) examples.push_back({data[i], targets[i]});
  const torch::data::Example<> batch = accelerate::DefaultCollate{}(examples);
  expect_same_batch(batch.data, data);
  expect_same_batch(batch.target, targets);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
