// Collectives on Kokkos views give what the same collectives give on
// tensors, at any number of ranks, and move the views' own memory.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/interop/kokkos.hpp"
#include "accelerate/runtime/state.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::kokkos::to_tensor;

accelerate::State* g_state = nullptr;

class KokkosEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    state_ = std::make_unique<accelerate::State>();
    // The command-line form: Kokkos reads (and removes) its --kokkos-* flags.
    std::vector<std::string> words{"kokkos_collectives_test", "--user-flag"};
    std::vector<char*> argv;
    for (auto& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    int argc = 2;
    runtime_ = std::make_unique<accelerate::kokkos::KokkosRuntime>(*state_, argc, argv.data());
    g_state = state_.get();
  }
  void TearDown() override {
    g_state = nullptr;
    runtime_.reset();
    state_.reset();
  }

 private:
  std::unique_ptr<accelerate::State> state_;
  std::unique_ptr<accelerate::kokkos::KokkosRuntime> runtime_;
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new KokkosEnvironment);

class KokkosCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(g_state, nullptr);
    group_ = accelerate::ProcessGroup::world(*g_state);
    rank_ = group_->rank();
    size_ = group_->size();
  }
  std::unique_ptr<accelerate::ProcessGroup> group_;
  int rank_ = 0;
  int size_ = 1;
};

// A value that depends on the rank and the element, so a wrong rank order
// or a wrong element mapping shows.
double value_at(int rank, std::size_t i, std::size_t j) { return 1000.0 * rank + 10.0 * i + j; }

template <class V>
void fill(const V& view, int rank) {
  for (std::size_t i = 0; i < view.extent(0); ++i)
    for (std::size_t j = 0; j < view.extent(1); ++j) view(i, j) = static_cast<typename V::value_type>(value_at(rank, i, j));
}

template <class V>
at::Tensor reference_tensor(const V& view, int rank) {
  at::Tensor t = at::empty({static_cast<std::int64_t>(view.extent(0)), static_cast<std::int64_t>(view.extent(1))},
                           at::TensorOptions().dtype(accelerate::kokkos::dtype_of<typename V::value_type>()));
  for (std::size_t i = 0; i < view.extent(0); ++i)
    for (std::size_t j = 0; j < view.extent(1); ++j) t[i][j] = value_at(rank, i, j);
  return t;
}

template <class V>
void expect_view_equals(const V& view, const at::Tensor& expected) {
  ASSERT_EQ(expected.dim(), 2);
  ASSERT_EQ(expected.size(0), static_cast<std::int64_t>(view.extent(0)));
  ASSERT_EQ(expected.size(1), static_cast<std::int64_t>(view.extent(1)));
  for (std::size_t i = 0; i < view.extent(0); ++i)
    for (std::size_t j = 0; j < view.extent(1); ++j)
      EXPECT_DOUBLE_EQ(static_cast<double>(view(i, j)), expected[i][j].item<double>()) << i << "," << j;
}

TEST_F(KokkosCollectives, AllReduceOnEveryLayoutMatchesTensors) {
  Kokkos::View<double**, Kokkos::LayoutRight> right("r", 3, 5);
  Kokkos::View<double**, Kokkos::LayoutLeft> left("l", 3, 5);
  fill(right, rank_);
  fill(left, rank_);
  at::Tensor expected = reference_tensor(right, rank_);
  const double* right_data = right.data();

  accelerate::all_reduce(*group_, right);
  accelerate::all_reduce(*group_, left);
  group_->all_reduce(expected);

  EXPECT_EQ(right.data(), right_data);  // in place
  expect_view_equals(right, expected);
  expect_view_equals(left, expected);
}

TEST_F(KokkosCollectives, AllReduceOptionsAndDtypes) {
  Kokkos::View<std::int32_t**> ints("i", 2, 4);
  Kokkos::View<std::int64_t**, Kokkos::LayoutLeft> longs("l", 2, 4);
  Kokkos::View<float**> floats("f", 2, 4);
  fill(ints, rank_);
  fill(longs, rank_);
  fill(floats, rank_);
  accelerate::all_reduce(*group_, ints, {.op = accelerate::ReduceOp::Max});
  accelerate::all_reduce(*group_, longs, {.op = accelerate::ReduceOp::Min});
  accelerate::all_reduce(*group_, floats, {.op = accelerate::ReduceOp::Avg});
  at::Tensor max = reference_tensor(ints, size_ - 1);
  at::Tensor min = reference_tensor(longs, 0);
  at::Tensor mean = reference_tensor(floats, 0) + 1000.0 * (size_ - 1) / 2.0;
  expect_view_equals(ints, max);
  expect_view_equals(longs, min);
  expect_view_equals(floats, mean);
}

TEST_F(KokkosCollectives, AllReduceOnAStridedSubviewLeavesTheRestAlone) {
  Kokkos::View<double**> field("f", 4, 6);
  fill(field, rank_);
  auto columns = Kokkos::subview(field, Kokkos::ALL, std::make_pair(1, 3));  // holes between rows
  accelerate::all_reduce(*group_, columns);
  double rank_sum = 0;
  for (int r = 0; r < size_; ++r) rank_sum += 1000.0 * r;
  for (std::size_t i = 0; i < 4; ++i) {
    for (std::size_t j = 0; j < 6; ++j) {
      const bool reduced = j == 1 || j == 2;
      const double want = reduced ? rank_sum + size_ * (10.0 * i + j) : value_at(rank_, i, j);
      EXPECT_EQ(field(i, j), want) << i << "," << j;
    }
  }
}

TEST_F(KokkosCollectives, AsyncAllReduceAndBroadcast) {
  Kokkos::View<double**> view("v", 2, 3);
  fill(view, rank_);
  auto work = accelerate::all_reduce_async(*group_, view);
  work->wait();
  at::Tensor expected = reference_tensor(view, rank_);
  group_->all_reduce(expected);
  expect_view_equals(view, expected);

  const int root = size_ - 1;
  Kokkos::View<float**, Kokkos::LayoutLeft> left("l", 3, 2);
  fill(left, rank_);
  accelerate::broadcast(*group_, left, {.root = root});
  expect_view_equals(left, reference_tensor(left, root));

  Kokkos::View<std::int64_t**> ints("i", 2, 2);
  fill(ints, rank_);
  accelerate::broadcast_async(*group_, ints, {.root = 0})->wait();
  expect_view_equals(ints, reference_tensor(ints, 0));
}

TEST_F(KokkosCollectives, AllGatherAndGatherIntoViews) {
  Kokkos::View<double**> input("in", 2, 3);
  fill(input, rank_);
  Kokkos::View<double**> gathered("out", 2 * size_, 3);
  accelerate::all_gather(*group_, gathered, input);
  at::Tensor expected = group_->all_gather(reference_tensor(input, rank_));
  expect_view_equals(gathered, expected);
  EXPECT_TRUE(at::equal(accelerate::all_gather(*group_, input), expected));

  // The LayoutLeft output is filled element by element in its own layout.
  Kokkos::View<double**, Kokkos::LayoutLeft> gathered_left("outl", 2 * size_, 3);
  accelerate::all_gather(*group_, gathered_left, input);
  expect_view_equals(gathered_left, expected);

  const int root = size_ / 2;
  Kokkos::View<double**> at_root("root", rank_ == root ? 2 * size_ : 0, 3);
  accelerate::gather(*group_, at_root, input, {.root = root});
  if (rank_ == root) expect_view_equals(at_root, expected);
}

TEST_F(KokkosCollectives, ScatterReduceScatterAllToAll) {
  Kokkos::View<std::int32_t**> whole("whole", 2 * size_, 3);
  fill(whole, rank_);
  at::Tensor whole_tensor = reference_tensor(whole, rank_);

  Kokkos::View<std::int32_t**> block("block", 2, 3);
  accelerate::scatter(*group_, block, whole, {.root = 0});
  at::Tensor expected_block = reference_tensor(whole, 0).slice(0, 2 * rank_, 2 * rank_ + 2);
  expect_view_equals(block, expected_block);

  Kokkos::View<std::int32_t**> reduced("reduced", 2, 3);
  accelerate::reduce_scatter(*group_, reduced, whole);
  expect_view_equals(reduced, group_->reduce_scatter(whole_tensor));

  Kokkos::View<std::int32_t**> exchanged("exchanged", 2 * size_, 3);
  accelerate::all_to_all(*group_, exchanged, whole);
  expect_view_equals(exchanged, group_->all_to_all(whole_tensor));
}

TEST_F(KokkosCollectives, NestedOperationsOnViews) {
  // First extents differ between ranks (rank r has r + 1 rows).
  Kokkos::View<float**> rows("rows", rank_ + 1, 2);
  fill(rows, rank_);
  at::Tensor mine = reference_tensor(rows, rank_);
  at::Tensor gathered = accelerate::gather(*group_, rows);
  EXPECT_TRUE(at::equal(gathered, accelerate::gather(*group_, mine)));
  EXPECT_EQ(gathered.size(0), static_cast<std::int64_t>(size_ * (size_ + 1) / 2));

  at::Tensor padded = accelerate::pad_across_processes(*group_, rows, 0, -1);
  EXPECT_TRUE(at::equal(padded, accelerate::pad_across_processes(*group_, mine, 0, -1)));
  EXPECT_EQ(padded.size(0), size_);

  Kokkos::View<double**> same("same", 2, 2);
  fill(same, rank_);
  at::Tensor mean = accelerate::reduce(*group_, same);
  EXPECT_TRUE(at::allclose(mean, accelerate::reduce(*group_, reference_tensor(same, rank_))));
  expect_view_equals(same, reference_tensor(same, rank_));  // the input is only read
}

TEST_F(KokkosCollectives, MismatchedViewsRaiseOnEveryRank) {
  // Shapes that differ between ranks: the group's checks name the problem on every rank.
  Kokkos::View<double**> uneven("u", 2, 3);
  Kokkos::View<double**> wrong_output("o", 2 * size_ + 1, 3);
  const auto message = accelerate::testing::error_of<accelerate::Error>(
      [&] { accelerate::all_gather(*group_, wrong_output, uneven); });
  EXPECT_NE(message.find("all_gather"), std::string::npos) << message;
  EXPECT_NE(message, "<no exception>");
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
