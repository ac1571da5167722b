// Views as tensors and tensors as views: shared memory, lifetimes, layouts,
// dtypes, every error, the copying calls and ViewDataset. Kokkos runs for
// the whole executable (it can be initialised once per process).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <complex>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "accelerate/data/data_loader_shard.hpp"
#include "accelerate/interop/kokkos.hpp"
#include "accelerate/runtime/state.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::kokkos::ConversionError;
using accelerate::kokkos::copy_to_tensor;
using accelerate::kokkos::copy_to_view;
using accelerate::kokkos::to_tensor;
using accelerate::kokkos::to_view;
using accelerate::testing::error_of;

class KokkosEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    state_ = std::make_unique<accelerate::State>();
    runtime_ = std::make_unique<accelerate::kokkos::KokkosRuntime>(*state_);
  }
  void TearDown() override {
    runtime_.reset();  // Kokkos before MPI
    state_.reset();
  }

 private:
  std::unique_ptr<accelerate::State> state_;
  std::unique_ptr<accelerate::kokkos::KokkosRuntime> runtime_;
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new KokkosEnvironment);

template <class V>
void fill_2d(const V& view) {
  for (std::size_t i = 0; i < view.extent(0); ++i)
    for (std::size_t j = 0; j < view.extent(1); ++j) view(i, j) = static_cast<typename V::value_type>(10 * i + j);
}

template <class V>
void expect_same_2d(const V& view, const at::Tensor& tensor) {
  ASSERT_EQ(tensor.dim(), 2);
  ASSERT_EQ(tensor.size(0), static_cast<std::int64_t>(view.extent(0)));
  ASSERT_EQ(tensor.size(1), static_cast<std::int64_t>(view.extent(1)));
  for (std::size_t i = 0; i < view.extent(0); ++i)
    for (std::size_t j = 0; j < view.extent(1); ++j)
      EXPECT_EQ(tensor[i][j].item<double>(), static_cast<double>(view(i, j))) << i << "," << j;
}

// --- sharing ------------------------------------------------------------------------

TEST(KokkosShare, WritesThroughTheTensorShowInTheView) {
  Kokkos::View<double**> view("v", 3, 4);
  at::Tensor tensor = to_tensor(view);
  EXPECT_EQ(tensor.data_ptr(), static_cast<void*>(view.data()));
  EXPECT_EQ(tensor.device(), c10::Device(c10::kCPU));
  tensor.fill_(2.5);
  tensor[1][2] = 7.0;
  EXPECT_EQ(view(0, 0), 2.5);
  EXPECT_EQ(view(1, 2), 7.0);
}

TEST(KokkosShare, WritesThroughTheViewShowInTheTensor) {
  Kokkos::View<float**> view("v", 3, 4);
  at::Tensor tensor = to_tensor(view);
  fill_2d(view);
  expect_same_2d(view, tensor);
}

TEST(KokkosShare, TensorAsViewSharesBothWays) {
  at::Tensor tensor = at::zeros({5, 2}, at::kInt);
  auto view = to_view<Kokkos::View<std::int32_t**>>(tensor);
  EXPECT_EQ(static_cast<void*>(view.data()), tensor.data_ptr());
  view(4, 1) = 42;
  EXPECT_EQ(tensor[4][1].item<int>(), 42);
  tensor[0][0] = -3;
  EXPECT_EQ(view(0, 0), -3);
}

// --- lifetimes ---------------------------------------------------------------------------

TEST(KokkosLifetime, TensorKeepsTheAllocationAliveAfterTheViewIsGone) {
  at::Tensor tensor;
  {
    Kokkos::View<double*> view("v", 1000);
    for (int i = 0; i < 1000; ++i) view(i) = i;
    tensor = to_tensor(view);
    EXPECT_EQ(view.use_count(), 2);  // the view and the tensor's deleter
  }
  // The only reference left is the tensor's; reading it is valid (ASan checks).
  EXPECT_EQ(tensor.sum().item<double>(), 999.0 * 1000.0 / 2.0);
  tensor.mul_(2);
  EXPECT_EQ(tensor[999].item<double>(), 1998.0);
}

TEST(KokkosLifetime, ViewOutlivesTheTensor) {
  Kokkos::View<double*> view("v", 16);
  const auto before = accelerate::kokkos::detail::live_shared_tensors().load();
  {
    at::Tensor tensor = to_tensor(view);
    at::Tensor alias = tensor.view({4, 4});  // another tensor on the same storage
    EXPECT_EQ(view.use_count(), 2);
    EXPECT_EQ(accelerate::kokkos::detail::live_shared_tensors().load(), before + 1);
    alias.fill_(1.0);
  }
  EXPECT_EQ(view.use_count(), 1);
  EXPECT_EQ(accelerate::kokkos::detail::live_shared_tensors().load(), before);
  EXPECT_EQ(view(15), 1.0);
  view(0) = 5.0;  // still ours
}

TEST(KokkosLifetime, UnmanagedViewOverATensorNeedsOnlyTheTensor) {
  at::Tensor tensor = at::arange(12, at::kLong).reshape({3, 4});
  auto view = to_view<Kokkos::View<std::int64_t**>>(tensor);
  EXPECT_EQ(view.use_count(), 0);  // unmanaged: Kokkos does not track it
  {
    // The tensor handle may go as long as another tensor holds the storage.
    at::Tensor keep = tensor;
    tensor = at::Tensor();
    EXPECT_EQ(view(2, 3), 11);
  }
}

TEST(KokkosLifetime, RoundTripViewTensorView) {
  Kokkos::View<float**> original("o", 2, 3);
  fill_2d(original);
  auto again = to_view<Kokkos::View<float**>>(to_tensor(original));
  // The temporary tensor is gone; `original` owns the memory and `again` aliases it.
  EXPECT_EQ(again.data(), original.data());
  EXPECT_EQ(again(1, 2), 12.0f);
}

// --- layouts -------------------------------------------------------------------------------

TEST(KokkosLayout, LayoutRightIsContiguous) {
  Kokkos::View<double***, Kokkos::LayoutRight> view("v", 2, 3, 4);
  at::Tensor tensor = to_tensor(view);
  EXPECT_TRUE(tensor.is_contiguous());
  EXPECT_EQ(tensor.strides().vec(), (std::vector<std::int64_t>{12, 4, 1}));
}

TEST(KokkosLayout, LayoutLeftIsColumnMajor) {
  Kokkos::View<double**, Kokkos::LayoutLeft> view("v", 3, 5);
  fill_2d(view);
  at::Tensor tensor = to_tensor(view);
  EXPECT_EQ(tensor.strides().vec(), (std::vector<std::int64_t>{1, 3}));
  EXPECT_TRUE(tensor.t().is_contiguous());
  expect_same_2d(view, tensor);
  tensor[2][4] = -1.0;
  EXPECT_EQ(view(2, 4), -1.0);
}

TEST(KokkosLayout, LayoutStrideViewKeepsItsStrides) {
  Kokkos::LayoutStride layout(4, 10, 3, 2);  // extents 4, 3; strides 10, 2
  Kokkos::View<double*> storage("s", 40);
  Kokkos::View<double**, Kokkos::LayoutStride, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> view(storage.data(),
                                                                                                   layout);
  fill_2d(view);
  at::Tensor tensor = to_tensor(view);
  EXPECT_EQ(tensor.strides().vec(), (std::vector<std::int64_t>{10, 2}));
  expect_same_2d(view, tensor);
}

TEST(KokkosLayout, SubviewsOfEveryKind) {
  Kokkos::View<float***> cube("c", 4, 5, 6);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 5; ++j)
      for (std::size_t k = 0; k < 6; ++k) cube(i, j, k) = static_cast<float>(100 * i + 10 * j + k);

  auto column = Kokkos::subview(cube, Kokkos::ALL, 2, Kokkos::ALL);  // [4, 6], strides 30, 1
  at::Tensor c = to_tensor(column);
  EXPECT_EQ(c.strides().vec(), (std::vector<std::int64_t>{30, 1}));
  expect_same_2d(column, c);

  auto block = Kokkos::subview(cube, std::make_pair(1, 3), Kokkos::ALL, 4);  // [2, 5], strides 30, 6
  at::Tensor b = to_tensor(block);
  EXPECT_EQ(b.strides().vec(), (std::vector<std::int64_t>{30, 6}));
  expect_same_2d(block, b);
  b.fill_(-1.0f);
  EXPECT_EQ(cube(1, 0, 4), -1.0f);
  EXPECT_EQ(cube(2, 4, 4), -1.0f);
  EXPECT_EQ(cube(0, 0, 4), 4.0f);  // outside the subview
  EXPECT_EQ(cube(1, 0, 3), 103.0f);

  Kokkos::View<double**, Kokkos::LayoutLeft> left("l", 6, 7);
  fill_2d(left);
  auto rows = Kokkos::subview(left, std::make_pair(1, 4), std::make_pair(2, 5));
  expect_same_2d(rows, to_tensor(rows));
}

TEST(KokkosLayout, RankZeroAndRankEightAndStaticExtents) {
  Kokkos::View<double> scalar("s");
  scalar() = 3.25;
  at::Tensor s = to_tensor(scalar);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<double>(), 3.25);
  auto back = to_view<Kokkos::View<double>>(s);
  EXPECT_EQ(back(), 3.25);

  Kokkos::View<int********> eight("e", 2, 1, 2, 1, 2, 1, 2, 3);
  at::Tensor e = to_tensor(eight);
  EXPECT_EQ(e.dim(), 8);
  e.fill_(9);
  EXPECT_EQ(eight(1, 0, 1, 0, 1, 0, 1, 2), 9);
  auto eight_again = to_view<Kokkos::View<int********>>(e);
  EXPECT_EQ(eight_again.extent(7), 3u);

  Kokkos::View<float* [3]> fixed("f", 5);
  at::Tensor f = to_tensor(fixed);
  EXPECT_EQ(f.sizes().vec(), (std::vector<std::int64_t>{5, 3}));
  auto fixed_again = to_view<Kokkos::View<float* [3]>>(f);
  EXPECT_EQ(fixed_again.data(), fixed.data());
}

TEST(KokkosLayout, TensorsAsViewsOfEachLayout) {
  at::Tensor base = at::arange(24, at::kDouble).reshape({4, 6});

  auto right = to_view<Kokkos::View<double**, Kokkos::LayoutRight>>(base);
  auto left = to_view<Kokkos::View<double**, Kokkos::LayoutLeft>>(base.t());  // [6, 4], column-major
  at::Tensor sliced = base.slice(1, 1, 6, 2);                                     // [4, 3], strides 6, 2
  auto strided = to_view<Kokkos::View<double**, Kokkos::LayoutStride>>(sliced);
  auto from_left = to_view<Kokkos::View<double**, Kokkos::LayoutStride>>(base.t());

  expect_same_2d(right, base);
  expect_same_2d(left, base.t());
  expect_same_2d(strided, sliced);
  expect_same_2d(from_left, base.t());
  EXPECT_EQ(strided.stride(0), 6u);
  EXPECT_EQ(strided.stride(1), 2u);
  strided(3, 2) = -5.0;
  EXPECT_EQ(base[3][5].item<double>(), -5.0);

  // Extent-1 dimensions never move the address: any stride is accepted there.
  at::Tensor row = base.slice(0, 2, 3);  // [1, 6]
  auto one_row = to_view<Kokkos::View<double**, Kokkos::LayoutLeft>>(row.t().contiguous().t().slice(1, 0, 6));
  EXPECT_EQ(one_row.extent(0), 1u);
}

// --- dtypes ------------------------------------------------------------------------------------

template <class T>
class KokkosDtype : public ::testing::Test {};
using Scalars = ::testing::Types<float, double, std::int8_t, std::uint8_t, std::int16_t, std::int32_t,
                                 std::int64_t, bool>;
TYPED_TEST_SUITE(KokkosDtype, Scalars);

TYPED_TEST(KokkosDtype, MapsToTheTensorDtypeOfTheSameBits) {
  using T = TypeParam;
  Kokkos::View<T*> view("v", 7);
  for (int i = 0; i < 7; ++i) view(i) = static_cast<T>(i % 2 == 0 ? i : 0);
  at::Tensor tensor = to_tensor(view);
  EXPECT_EQ(tensor.scalar_type(), accelerate::kokkos::dtype_of<T>());
  EXPECT_EQ(tensor.element_size(), static_cast<std::int64_t>(sizeof(T)));
  for (int i = 0; i < 7; ++i) EXPECT_EQ(tensor[i].item<T>(), view(i));
  auto back = to_view<Kokkos::View<T*>>(tensor);
  back(6) = static_cast<T>(1);
  EXPECT_EQ(view(6), static_cast<T>(1));
  auto read_only = to_view<Kokkos::View<const T*>>(tensor);
  EXPECT_EQ(read_only(6), static_cast<T>(1));
  EXPECT_EQ(to_tensor(read_only).data_ptr(), tensor.data_ptr());
}

TEST(KokkosDtypeTable, ExpectedDtypes) {
  using accelerate::kokkos::dtype_of;
  EXPECT_EQ(dtype_of<float>(), at::kFloat);
  EXPECT_EQ(dtype_of<double>(), at::kDouble);
  EXPECT_EQ(dtype_of<std::int32_t>(), at::kInt);
  EXPECT_EQ(dtype_of<std::int64_t>(), at::kLong);
  EXPECT_EQ(dtype_of<const float>(), at::kFloat);
#if ACCELERATE_KOKKOS_HAS_HALF
  EXPECT_EQ(dtype_of<Kokkos::Experimental::half_t>(), at::kHalf);
#else
  // Without a 16-bit half in Kokkos (Serial/OpenMP builds) half_t is float.
  static_assert(std::is_same_v<Kokkos::Experimental::half_t, float>);
#endif
#if ACCELERATE_KOKKOS_HAS_BFLOAT16
  EXPECT_EQ(dtype_of<Kokkos::Experimental::bhalf_t>(), at::kBFloat16);
#endif
}

// Unsupported view types are rejected at compile time.
template <class V>
concept ConvertsToTensor = requires(const V& view) { accelerate::kokkos::to_tensor(view); };
static_assert(ConvertsToTensor<Kokkos::View<float**>>);
static_assert(!ConvertsToTensor<Kokkos::View<std::complex<double>*>>, "no complex mapping");
static_assert(!ConvertsToTensor<Kokkos::View<long double*>>, "no long double dtype");
static_assert(!ConvertsToTensor<std::vector<float>>, "not a view");
static_assert(!accelerate::kokkos::ShareableMemorySpace<Kokkos::AnonymousSpace>);

// --- errors ------------------------------------------------------------------------------------------

TEST(KokkosErrors, DtypeMismatch) {
  const auto message = error_of<ConversionError>([] { (void)to_view<Kokkos::View<float*>>(at::zeros({3}, at::kDouble)); });
  EXPECT_NE(message.find("dtype is Double"), std::string::npos) << message;
  EXPECT_NE(message.find("needs Float"), std::string::npos) << message;
  const auto complex = error_of<ConversionError>(
      [] { (void)to_view<Kokkos::View<double*>>(at::zeros({3}, at::kComplexDouble)); });
  EXPECT_NE(complex.find("ComplexDouble"), std::string::npos) << complex;
}

TEST(KokkosErrors, RankMismatchAndRankAboveEight) {
  auto message = error_of<ConversionError>([] { (void)to_view<Kokkos::View<float**>>(at::zeros({3}, at::kFloat)); });
  EXPECT_NE(message.find("1 dimensions [3] but the view has rank 2"), std::string::npos) << message;
  std::vector<std::int64_t> nine(9, 1);
  message = error_of<ConversionError>([&] { (void)to_view<Kokkos::View<float********>>(at::zeros(nine)); });
  EXPECT_NE(message.find("at most 8 dimensions"), std::string::npos) << message;
}

TEST(KokkosErrors, StaticExtentMismatch) {
  const auto message =
      error_of<ConversionError>([] { (void)to_view<Kokkos::View<float* [3]>>(at::zeros({5, 4}, at::kFloat)); });
  EXPECT_NE(message.find("fixes it at 3"), std::string::npos) << message;
}

TEST(KokkosErrors, NonContiguousForLayoutRight) {
  at::Tensor base = at::zeros({4, 6}, at::kFloat);
  auto message = error_of<ConversionError>([&] { (void)to_view<Kokkos::View<float**>>(base.t()); });
  EXPECT_NE(message.find("Kokkos::LayoutRight needs [4, 1]"), std::string::npos) << message;
  EXPECT_NE(message.find("LayoutStride"), std::string::npos) << message;
  message = error_of<ConversionError>([&] { (void)to_view<Kokkos::View<float**>>(base.slice(1, 0, 6, 2)); });
  EXPECT_NE(message.find("strides [6, 2]"), std::string::npos) << message;
}

TEST(KokkosErrors, WrongLayoutLeft) {
  const auto message = error_of<ConversionError>(
      [] { (void)to_view<Kokkos::View<float**, Kokkos::LayoutLeft>>(at::zeros({4, 6}, at::kFloat)); });
  EXPECT_NE(message.find("Kokkos::LayoutLeft needs [1, 4]"), std::string::npos) << message;
}

TEST(KokkosErrors, ExpandedTensorForLayoutStride) {
  at::Tensor expanded = at::zeros({1, 6}, at::kFloat).expand({4, 6});
  const auto message = error_of<ConversionError>(
      [&] { (void)to_view<Kokkos::View<float**, Kokkos::LayoutStride>>(expanded); });
  EXPECT_NE(message.find("stride 0"), std::string::npos) << message;
}

TEST(KokkosErrors, WrongMemorySpace) {
  // A tensor HostSpace cannot address (the meta device has no memory at all).
  at::Tensor meta = at::empty({4}, at::TensorOptions().dtype(at::kFloat).device(c10::kMeta));
  const auto message = error_of<ConversionError>([&] { (void)to_view<Kokkos::View<float*>>(meta); });
  EXPECT_NE(message.find("the tensor is on meta but Kokkos::HostSpace memory is addressed from cpu"),
            std::string::npos)
      << message;
}

TEST(KokkosErrors, UndefinedTensorAndCopyShape) {
  auto message = error_of<ConversionError>([] { (void)to_view<Kokkos::View<float*>>(at::Tensor()); });
  EXPECT_NE(message.find("undefined"), std::string::npos) << message;
  Kokkos::View<float*> view("v", 3);
  message = error_of<ConversionError>([&] { copy_to_view(at::zeros({4}), view); });
  EXPECT_NE(message.find("differs from the view's [3]"), std::string::npos) << message;
}

// --- copies --------------------------------------------------------------------------------------------

TEST(KokkosCopy, CopyToTensorOwnsItsMemory) {
  Kokkos::View<double**, Kokkos::LayoutLeft> view("v", 3, 4);
  fill_2d(view);
  at::Tensor copy = copy_to_tensor(view);
  EXPECT_TRUE(copy.is_contiguous());
  EXPECT_NE(copy.data_ptr(), static_cast<void*>(view.data()));
  expect_same_2d(view, copy);
  view(0, 0) = 99.0;
  EXPECT_EQ(copy[0][0].item<double>(), 0.0);
}

TEST(KokkosCopy, CopyToViewFillsAnyLayout) {
  Kokkos::View<float**, Kokkos::LayoutLeft> view("v", 2, 3);
  at::Tensor source = at::arange(6, at::kDouble).reshape({2, 3});
  copy_to_view(source, view);  // dtype converted as Tensor::copy_ does
  expect_same_2d(view, source);
}

// --- ViewDataset ---------------------------------------------------------------------------------------

TEST(KokkosDataset, ServesSamplesSharingTheViews) {
  Kokkos::View<float**> x("x", 10, 3);
  Kokkos::View<std::int64_t*> y("y", 10);
  for (int i = 0; i < 10; ++i) {
    for (int j = 0; j < 3; ++j) x(i, j) = static_cast<float>(i * 3 + j);
    y(i) = i % 4;
  }
  accelerate::kokkos::ViewDataset dataset(x, y);
  EXPECT_EQ(*dataset.size(), 10u);
  auto sample = dataset.get(7);
  EXPECT_EQ(sample.data.sizes().vec(), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(sample.data[2].item<float>(), 23.0f);
  EXPECT_EQ(sample.target.item<std::int64_t>(), 3);
  x(7, 2) = -1.0f;  // later reads see the view's current values
  EXPECT_EQ(dataset.get(7).data[2].item<float>(), -1.0f);

  const auto message = error_of([&] { (void)dataset.get(10); });
  EXPECT_NE(message.find("sample 10 is out of range for 10 samples"), std::string::npos) << message;
}

TEST(KokkosDataset, RejectsMismatchedTargetsAndWorksWithoutThem) {
  Kokkos::View<double**, Kokkos::LayoutLeft> x("x", 6, 2);
  Kokkos::View<int*> y("y", 5);
  const auto message = error_of([&] { accelerate::kokkos::ViewDataset bad(x, y); });
  EXPECT_NE(message.find("6 samples (extent 0) but the targets view has 5"), std::string::npos) << message;

  accelerate::kokkos::ViewDataset unlabeled(x);
  EXPECT_EQ(unlabeled.get(0).target.numel(), 0);
}

TEST(KokkosDataset, FeedsADataLoaderShard) {
  Kokkos::View<float**> x("x", 12, 2);
  Kokkos::View<std::int64_t*> y("y", 12);
  for (int i = 0; i < 12; ++i) {
    x(i, 0) = static_cast<float>(i);
    x(i, 1) = static_cast<float>(-i);
    y(i) = i;
  }
  // Rank 1 of 2: with batch size 2 it gets batches {2,3}, {6,7}, {10,11}.
  accelerate::DataLoaderShard loader(accelerate::kokkos::ViewDataset(x, y),
                                     accelerate::DataLoaderPlacement{2, 1, "cpu"}, {.batch_size = 2});
  std::vector<std::int64_t> seen;
  for (const auto& batch : loader) {
    ASSERT_EQ(batch.data.sizes().vec(), (std::vector<std::int64_t>{2, 2}));
    for (std::int64_t k = 0; k < 2; ++k) {
      const auto index = batch.target[k].item<std::int64_t>();
      EXPECT_EQ(batch.data[k][0].item<float>(), static_cast<float>(index));
      EXPECT_EQ(batch.data[k][1].item<float>(), static_cast<float>(-index));
      seen.push_back(index);
    }
  }
  EXPECT_EQ(seen, (std::vector<std::int64_t>{2, 3, 6, 7, 10, 11}));
}

TEST(KokkosDataset, ConcurrentWorkersSeeEverySampleOnce) {
  Kokkos::View<double**> x("x", 64, 4);
  Kokkos::View<std::int64_t*> y("y", 64);
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 4; ++j) x(i, j) = i;
    y(i) = i;
  }
  accelerate::DataLoaderShard loader(accelerate::kokkos::ViewDataset(x, y),
                                     accelerate::DataLoaderPlacement{1, 0, "cpu"},
                                     {.batch_size = 4, .shuffle = true, .num_workers = 2}, {.data_seed = 7});
  std::set<std::int64_t> seen;
  for (const auto& batch : loader) {
    for (std::int64_t k = 0; k < batch.target.size(0); ++k) {
      const auto index = batch.target[k].item<std::int64_t>();
      EXPECT_EQ(batch.data[k].sum().item<double>(), 4.0 * index);
      seen.insert(index);
    }
  }
  EXPECT_EQ(seen.size(), 64u);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
