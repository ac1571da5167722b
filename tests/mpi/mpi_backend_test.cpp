// The MPI backend through the world group, at 1, 2 and 4 ranks: every
// operation, every dtype LibTorch trains with, non-contiguous tensors,
// asynchronous completion and argument errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::ProcessGroup;
using accelerate::ReduceOp;

class MpiBackendTest : public ::testing::Test {
 protected:
  accelerate::State state;
  std::unique_ptr<ProcessGroup> group = ProcessGroup::world(state);
  int rank = state.process_index();
  int size = state.num_processes();
};

// Σ_r (r + 1) and friends, computed independently of the library.
double sum_of_ranks_plus_one(int n) { return n * (n + 1) / 2.0; }

TEST_F(MpiBackendTest, AllReduceFloatOps) {
  for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16}) {
    auto make = [&] { return torch::full({5, 3}, rank + 1.0, torch::dtype(dtype)); };
    auto t = make();
    group->all_reduce(t);
    EXPECT_TRUE(torch::allclose(t.to(torch::kFloat64), torch::full({5, 3}, sum_of_ranks_plus_one(size), torch::kFloat64)))
        << dtype;
    t = make();
    group->all_reduce(t, {.op = ReduceOp::Avg});
    EXPECT_NEAR(t[0][0].item<double>(), sum_of_ranks_plus_one(size) / size, 1e-2) << dtype;
    t = make();
    group->all_reduce(t, {.op = ReduceOp::Max});
    EXPECT_EQ(t[4][2].item<double>(), size) << dtype;
    t = make();
    group->all_reduce(t, {.op = ReduceOp::Min});
    EXPECT_EQ(t[1][1].item<double>(), 1.0) << dtype;
    t = make();
    group->all_reduce(t, {.op = ReduceOp::Product});
    double factorial = 1;
    for (int r = 1; r <= size; ++r) factorial *= r;
    EXPECT_EQ(t[0][1].item<double>(), factorial) << dtype;
  }
}

TEST_F(MpiBackendTest, HalfSumIsNotTruncatedToBytes) {
  // 0.5 + 0.25·r: exact in float16 and bfloat16 for these sizes.
  for (auto dtype : {torch::kFloat16, torch::kBFloat16}) {
    auto t = torch::full({1000}, 0.5 + 0.25 * rank, torch::dtype(dtype));
    group->all_reduce(t);
    double expected = 0;
    for (int r = 0; r < size; ++r) expected += 0.5 + 0.25 * r;
    EXPECT_EQ(t[999].item<double>(), expected) << dtype;
    EXPECT_EQ(t.scalar_type(), dtype);
  }
}

TEST_F(MpiBackendTest, AllReduceIntegerAndBool) {
  for (auto dtype : {torch::kInt32, torch::kInt64, torch::kUInt8, torch::kInt8, torch::kInt16}) {
    auto t = torch::full({7}, rank + 1, torch::dtype(dtype));
    group->all_reduce(t);
    EXPECT_EQ(t[3].item<int64_t>(), static_cast<int64_t>(sum_of_ranks_plus_one(size))) << dtype;
    auto m = torch::full({7}, rank, torch::dtype(dtype));
    group->all_reduce(m, {.op = ReduceOp::Max});
    EXPECT_EQ(m[6].item<int64_t>(), size - 1) << dtype;
  }
  // Bool: sum/max are OR, min/product are AND.
  auto any = torch::tensor({rank == size - 1, false});
  group->all_reduce(any);
  EXPECT_TRUE(any[0].item<bool>());
  EXPECT_FALSE(any[1].item<bool>());
  auto all = torch::tensor({true, rank != 0});
  group->all_reduce(all, {.op = ReduceOp::Min});
  EXPECT_TRUE(all[0].item<bool>());
  EXPECT_FALSE(all[1].item<bool>());  // rank 0 contributes false
}

TEST_F(MpiBackendTest, AverageOfIntegersIsRejectedOnEveryRank) {
  auto t = torch::ones({3}, torch::kInt64);
  try {
    group->all_reduce(t, {.op = ReduceOp::Avg});
    FAIL() << "expected ConfigError";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("floating-point"), std::string::npos) << error.what();
  }
}

TEST_F(MpiBackendTest, UnsupportedDtypeIsAClearError) {
  auto t = torch::ones({2}, torch::kComplexFloat);
  EXPECT_THROW(group->all_reduce(t), accelerate::ConfigError);
}

TEST_F(MpiBackendTest, NonContiguousTensorsAreReducedInPlace) {
  auto base = torch::arange(12, torch::kFloat32).reshape({3, 4}) + rank;
  auto view = base.t();  // non-contiguous view of base's storage
  ASSERT_FALSE(view.is_contiguous());
  group->all_reduce(view);
  auto expected = (torch::arange(12, torch::kFloat32).reshape({3, 4}) * size + sum_of_ranks_plus_one(size) - size);
  EXPECT_TRUE(torch::equal(base, expected));
}

TEST_F(MpiBackendTest, ContiguousAllReduceWorksOnTheCallersMemory) {
  auto t = torch::full({1024}, 1.0f);
  const void* before = t.data_ptr();
  group->all_reduce(t);
  EXPECT_EQ(t.data_ptr(), before);
  EXPECT_EQ(t[0].item<float>(), static_cast<float>(size));
}

TEST_F(MpiBackendTest, BroadcastFromTheLastRank) {
  const int root = size - 1;
  auto t = rank == root ? torch::arange(6, torch::kFloat64) : torch::zeros({6}, torch::kFloat64);
  group->broadcast(t, {.root = root});
  EXPECT_TRUE(torch::equal(t, torch::arange(6, torch::kFloat64)));
  auto strided = torch::zeros({4, 2}, torch::kInt64).t();
  if (rank == root) strided.copy_(torch::arange(8, torch::kInt64).reshape({2, 4}));
  group->broadcast(strided, {.root = root});
  EXPECT_TRUE(torch::equal(strided, torch::arange(8, torch::kInt64).reshape({2, 4})));
}

TEST_F(MpiBackendTest, AllGatherStacksInRankOrder) {
  auto mine = torch::full({2, 3}, rank, torch::kInt32);
  auto all = group->all_gather(mine);
  ASSERT_EQ(all.sizes(), (std::vector<int64_t>{2L * size, 3}));
  for (int r = 0; r < size; ++r) EXPECT_TRUE(torch::equal(all.slice(0, 2 * r, 2 * r + 2), torch::full({2, 3}, r, torch::kInt32)));
}

TEST_F(MpiBackendTest, AllGatherVaryingFirstDimension) {
  auto mine = torch::full({rank + 1, 2}, rank, torch::kFloat32);
  auto all = group->all_gather_varying(mine);
  ASSERT_EQ(all.size(0), static_cast<int64_t>(sum_of_ranks_plus_one(size)));
  int64_t row = 0;
  for (int r = 0; r < size; ++r) {
    for (int k = 0; k <= r; ++k, ++row) EXPECT_EQ(all[row][1].item<float>(), static_cast<float>(r));
  }
}

TEST_F(MpiBackendTest, GatherToTheLastRank) {
  const int root = size - 1;
  auto all = group->gather(torch::tensor({rank, rank * 10}), {.root = root});
  if (rank == root) {
    ASSERT_EQ(all.numel(), 2 * size);
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(all[2 * r].item<int64_t>(), r);
      EXPECT_EQ(all[2 * r + 1].item<int64_t>(), 10 * r);
    }
  } else {
    EXPECT_FALSE(all.defined());
  }
}

TEST_F(MpiBackendTest, ScatterFromRankZero) {
  auto source = rank == 0 ? torch::arange(3 * size, torch::kFloat32).reshape({size, 3}) : torch::Tensor();
  auto mine = torch::empty({1, 3});
  group->scatter(mine, source);
  EXPECT_TRUE(torch::equal(mine, torch::arange(3 * rank, 3 * rank + 3, torch::kFloat32).reshape({1, 3})));
}

TEST_F(MpiBackendTest, ReduceScatterSumsBlocks) {
  // Rank r contributes block b filled with r + b; block b lands on rank b.
  auto input = torch::empty({size, 4});
  for (int b = 0; b < size; ++b) input[b].fill_(rank + b);
  auto mine = group->reduce_scatter(input);
  ASSERT_EQ(mine.sizes(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(mine[0][0].item<float>(), static_cast<float>(sum_of_ranks_plus_one(size) - size + size * rank));
  auto averaged = group->reduce_scatter(input, {.op = ReduceOp::Avg});
  EXPECT_FLOAT_EQ(averaged[0][3].item<float>(), static_cast<float>((sum_of_ranks_plus_one(size) - size) / size + rank));
}

TEST_F(MpiBackendTest, AllToAllExchangesBlocks) {
  // Block b of rank r holds 100·r + b; after the exchange block r of rank b holds 100·r + b.
  auto input = torch::empty({size, 2}, torch::kInt64);
  for (int b = 0; b < size; ++b) input[b].fill_(100 * rank + b);
  auto output = group->all_to_all(input);
  for (int r = 0; r < size; ++r) EXPECT_EQ(output[r][1].item<int64_t>(), 100 * r + rank);
}

TEST_F(MpiBackendTest, AsyncOperationsOverlapAndComplete) {
  auto a = torch::full({1 << 16}, 1.0f);
  auto b = torch::full({1 << 10}, 2.0, torch::kFloat64);
  auto first = group->all_reduce_async(a);
  auto second = group->all_reduce_async(b, {.op = ReduceOp::Max});
  second->wait();
  first->wait();
  EXPECT_TRUE(first->is_completed());
  EXPECT_FALSE(first->exception());
  EXPECT_EQ(a[12345].item<float>(), static_cast<float>(size));
  EXPECT_EQ(b[0].item<double>(), 2.0);
  EXPECT_NE(first->description().find("all_reduce(sum) Float[65536]"), std::string::npos) << first->description();
  first->wait();  // waiting again is harmless
  group->barrier();
}

TEST_F(MpiBackendTest, WrongOutputSizeIsRejected) {
  auto input = torch::ones({4});
  auto output = torch::empty({4L * size + 1});
  try {
    group->all_gather_async(output, input);
    FAIL() << "expected ConfigError";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("group size × input elements"), std::string::npos) << error.what();
  }
  auto t = torch::ones({2});
  EXPECT_THROW(group->broadcast(t, {.root = size}), accelerate::ConfigError);
  if (size > 1) EXPECT_THROW(group->reduce_scatter(torch::ones({size + 1, 2})), accelerate::ConfigError);
  EXPECT_THROW(group->all_to_all(torch::tensor(1.0)), accelerate::ConfigError);
}

// ProcessGroup checks the arguments before it routes a call, whatever the
// backend: these reach no backend, and every rank gets the same answer.
TEST_F(MpiBackendTest, ArgumentsAreCheckedBeforeAnyBackendSeesThem) {
  const auto message_of = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const accelerate::ConfigError& error) {
      return std::string(error.what());
    }
    return std::string("no ConfigError");
  };
  const auto input = torch::ones({2});
  auto on_meta = torch::empty({2L * size}, torch::TensorOptions().device(torch::kMeta));
  EXPECT_NE(message_of([&] { group->all_gather_async(on_meta, input); }).find("put both on one device"),
            std::string::npos);
  auto doubles = torch::empty({2L * size}, torch::kDouble);
  EXPECT_NE(message_of([&] { group->all_gather_async(doubles, input); }).find("differs from input dtype"),
            std::string::npos);
  auto undefined = torch::Tensor();
  EXPECT_NE(message_of([&] { group->all_reduce(undefined); }).find("all_reduce: the input tensor is undefined"),
            std::string::npos);
  auto output = torch::empty({2});
  EXPECT_NE(message_of([&] { group->gather_async(output, input, {.root = -1}); }).find("root -1 is not a rank of group"),
            std::string::npos);
  EXPECT_NE(message_of([&] { group->scatter_async(output, input, {.root = size}); }).find("is not a rank of group"),
            std::string::npos);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
