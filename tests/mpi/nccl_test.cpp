// The NCCL backend at 1, 2 and 4 ranks.
//
// Without a GPU (the CI machine has none) these run for real: the unique-id
// bootstrap over MPI, the dtype and reduction tables, the tensor checks (on
// CUDA tensors that are described but never dereferenced), NcclComm's
// bookkeeping, the errors of make_nccl_backend and split_nccl_backend, and
// the default-stream fallback of a CPU-only LibTorch. The collectives need
// one GPU per rank and skip, on every rank alike, when there is none; the
// stream cases also need a CUDA LibTorch (ACCELERATE_TORCH_CUDA_STREAMS).
#include "comm/nccl/nccl_comm.hpp"  // first: it must precede <nccl.h>

#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "common/test_helpers.hpp"
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "comm/mpi/mpi_backend.hpp"
#include "comm/nccl/nccl_backend.hpp"
#include "comm/nccl/nccl_work.hpp"
#include "comm/nccl/shared_gpu.hpp"
#if ACCELERATE_TORCH_CUDA_STREAMS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::ReduceOp;
using namespace std::chrono_literals;

using accelerate::testing::world_rank;
using accelerate::testing::world_size;

/// True when `value` holds on every rank.
bool on_every_rank(bool value) {
  int mine = value ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

int visible_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::vector<std::array<unsigned char, sizeof(ncclUniqueId)>> gather_ids(const ncclUniqueId& id, MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<std::array<unsigned char, sizeof(ncclUniqueId)>> all(static_cast<std::size_t>(size));
  MPI_Allgather(&id, sizeof(id), MPI_BYTE, all.data(), sizeof(id), MPI_BYTE, comm);
  return all;
}

bool same_id(const ncclUniqueId& a, const ncclUniqueId& b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

/// The message of the `Exception` that `body` throws; a test failure (and
/// "") when it throws nothing or something else.
template <typename Exception, typename Body>
std::string message_of(Body&& body) {
  try {
    body();
  } catch (const Exception& error) {
    return error.what();
  } catch (const std::exception& error) {
    ADD_FAILURE() << "threw the wrong exception type: " << error.what();
    return "";
  }
  ADD_FAILURE() << "threw nothing";
  return "";
}

// --- the unique id ------------------------------------------------------------

TEST(NcclSharedGpu, RanksSharingAPhysicalGpuAreNamedWithTheRemedy) {
  using accelerate::detail::describe_shared_gpus;
  // Same bus id on different hosts, different bus ids on one host: no sharing.
  EXPECT_FALSE(describe_shared_gpus({"a/0000:01:00.0", "a/0000:02:00.0", "b/0000:01:00.0"}));
  EXPECT_FALSE(describe_shared_gpus({}));
  const auto shared = describe_shared_gpus({"a/0000:01:00.0", "a/0000:02:00.0", "a/0000:01:00.0"});
  ASSERT_TRUE(shared);
  EXPECT_NE(shared->find("ranks 0 and 2 share the GPU 0000:01:00.0 on host a"), std::string::npos) << *shared;
  EXPECT_NE(shared->find("one rank per GPU"), std::string::npos) << *shared;
  EXPECT_NE(shared->find("ACCELERATE_USE_CPU=1"), std::string::npos) << *shared;
}

TEST(NcclBootstrap, UniqueIdIsByteIdenticalOnEveryRank) {
  const ncclUniqueId id = accelerate::detail::exchange_nccl_unique_id(MPI_COMM_WORLD, 0, 60s);
  const auto all = gather_ids(id, MPI_COMM_WORLD);
  for (std::size_t r = 0; r < all.size(); ++r) {
    EXPECT_EQ(std::memcmp(all[r].data(), all[0].data(), sizeof(ncclUniqueId)), 0) << "rank " << r << " differs";
  }
  const ncclUniqueId zero{};
  EXPECT_FALSE(same_id(id, zero)) << "the id was never filled in";
}

TEST(NcclBootstrap, UniqueIdFromTheLastRankAsRoot) {
  const ncclUniqueId id = accelerate::detail::exchange_nccl_unique_id(MPI_COMM_WORLD, world_size() - 1, 60s);
  const auto all = gather_ids(id, MPI_COMM_WORLD);
  for (std::size_t r = 0; r < all.size(); ++r) {
    EXPECT_EQ(std::memcmp(all[r].data(), all[0].data(), sizeof(ncclUniqueId)), 0) << "rank " << r << " differs";
  }
}

TEST(NcclBootstrap, SuccessiveIdsDiffer) {
  const ncclUniqueId first = accelerate::detail::exchange_nccl_unique_id(MPI_COMM_WORLD, 0, 60s);
  const ncclUniqueId second = accelerate::detail::exchange_nccl_unique_id(MPI_COMM_WORLD, 0, 60s);
  EXPECT_FALSE(same_id(first, second)) << "two communicators would share one bootstrap";
  const auto all = gather_ids(second, MPI_COMM_WORLD);
  for (std::size_t r = 0; r < all.size(); ++r) {
    EXPECT_EQ(std::memcmp(all[r].data(), all[0].data(), sizeof(ncclUniqueId)), 0) << "rank " << r << " differs";
  }
}

TEST(NcclBootstrap, EachSubCommunicatorGetsItsOwnId) {
  // Sub-groups bootstrap their NCCL communicator over their MPI sub-communicator.
  const int rank = world_rank();
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  const ncclUniqueId id = accelerate::detail::exchange_nccl_unique_id(half, 0, 60s);
  const auto mine = gather_ids(id, half);
  for (std::size_t r = 0; r < mine.size(); ++r) {
    EXPECT_EQ(std::memcmp(mine[r].data(), mine[0].data(), sizeof(ncclUniqueId)), 0) << "member " << r << " differs";
  }
  // Across the world: rank 0 (even half) and rank 1 (odd half) hold different ids.
  const auto world = gather_ids(id, MPI_COMM_WORLD);
  if (world.size() >= 2) {
    EXPECT_NE(std::memcmp(world[0].data(), world[1].data(), sizeof(ncclUniqueId)), 0);
  }
  MPI_Comm_free(&half);
}

TEST(NcclBootstrap, RootOutsideTheCommunicatorIsAConfigErrorEverywhere) {
  for (const int root : {-1, world_size()}) {
    const std::string message = message_of<accelerate::ConfigError>(
        [&] { accelerate::detail::exchange_nccl_unique_id(MPI_COMM_WORLD, root, 10s); });
    EXPECT_NE(message.find("root " + std::to_string(root)), std::string::npos) << message;
  }
}

// --- dtype and reduction tables -------------------------------------------------

TEST(NcclTables, EverySupportedDtypeHasItsNcclType) {
  using accelerate::detail::nccl_datatype;
  EXPECT_EQ(nccl_datatype(c10::kFloat), ncclFloat32);
  EXPECT_EQ(nccl_datatype(c10::kDouble), ncclFloat64);
  EXPECT_EQ(nccl_datatype(c10::kHalf), ncclFloat16);
  EXPECT_EQ(nccl_datatype(c10::kBFloat16), ncclBfloat16);
  EXPECT_EQ(nccl_datatype(c10::kInt), ncclInt32);
  EXPECT_EQ(nccl_datatype(c10::kLong), ncclInt64);
  EXPECT_EQ(nccl_datatype(c10::kChar), ncclInt8);
  EXPECT_EQ(nccl_datatype(c10::kByte), ncclUint8);
  EXPECT_EQ(nccl_datatype(c10::kBool), ncclUint8);
}

TEST(NcclTables, UnsupportedDtypesAreConfigErrorsWithARemedy) {
  using accelerate::detail::nccl_datatype;
  for (const auto type : {c10::kComplexFloat, c10::kComplexDouble}) {
    const std::string message = message_of<accelerate::ConfigError>([&] { nccl_datatype(type); });
    EXPECT_NE(message.find(c10::toString(type)), std::string::npos) << message;
    EXPECT_NE(message.find("view_as_real"), std::string::npos) << message;
  }
  const std::string message = message_of<accelerate::ConfigError>([] { nccl_datatype(c10::kShort); });
  EXPECT_NE(message.find("Short"), std::string::npos) << message;
  EXPECT_NE(message.find("int32"), std::string::npos) << message;
}

TEST(NcclTables, EveryReduceOpHasItsNcclOp) {
  using accelerate::detail::nccl_reduction;
  EXPECT_EQ(nccl_reduction(ReduceOp::Sum), ncclSum);
  EXPECT_EQ(nccl_reduction(ReduceOp::Avg), ncclAvg);
  EXPECT_EQ(nccl_reduction(ReduceOp::Min), ncclMin);
  EXPECT_EQ(nccl_reduction(ReduceOp::Max), ncclMax);
  EXPECT_EQ(nccl_reduction(ReduceOp::Product), ncclProd);
}

TEST(NcclTables, NumericTypesKeepTheirReduction) {
  using accelerate::detail::nccl_reduction;
  for (const auto type : {c10::kFloat, c10::kDouble, c10::kHalf, c10::kBFloat16}) {
    EXPECT_EQ(nccl_reduction(ReduceOp::Avg, type, "all_reduce"), ncclAvg) << c10::toString(type);
    EXPECT_EQ(nccl_reduction(ReduceOp::Product, type, "all_reduce"), ncclProd) << c10::toString(type);
  }
  for (const auto type : {c10::kInt, c10::kLong, c10::kChar, c10::kByte}) {
    EXPECT_EQ(nccl_reduction(ReduceOp::Sum, type, "all_reduce"), ncclSum) << c10::toString(type);
    EXPECT_EQ(nccl_reduction(ReduceOp::Min, type, "all_reduce"), ncclMin) << c10::toString(type);
    EXPECT_EQ(nccl_reduction(ReduceOp::Max, type, "all_reduce"), ncclMax) << c10::toString(type);
  }
}

TEST(NcclTables, BoolReductionsAreLogicalOrAndAnd) {
  using accelerate::detail::nccl_reduction;
  // A uint8 sum is no OR: it exceeds 1, and 256 ranks' trues wrap to 0.
  EXPECT_EQ(nccl_reduction(ReduceOp::Sum, c10::kBool, "all_reduce"), ncclMax);
  EXPECT_EQ(nccl_reduction(ReduceOp::Max, c10::kBool, "all_reduce"), ncclMax);
  EXPECT_EQ(nccl_reduction(ReduceOp::Min, c10::kBool, "all_reduce"), ncclMin);
  EXPECT_EQ(nccl_reduction(ReduceOp::Product, c10::kBool, "all_reduce"), ncclMin);
}

TEST(NcclTables, AvgOfIntegersOrBoolsIsAConfigError) {
  using accelerate::detail::nccl_reduction;
  for (const auto type : {c10::kInt, c10::kLong, c10::kByte, c10::kBool}) {
    const std::string message =
        message_of<accelerate::ConfigError>([&] { nccl_reduction(ReduceOp::Avg, type, "all_reduce"); });
    EXPECT_NE(message.find("all_reduce"), std::string::npos) << message;
    EXPECT_NE(message.find("Avg"), std::string::npos) << message;
  }
}

// --- tensor checks (tensors described, never dereferenced) -----------------------

float fake_storage[64];

at::Tensor fake_cuda_tensor(int device, at::IntArrayRef sizes, std::optional<at::IntArrayRef> strides = {}) {
  const c10::Device where(c10::kCUDA, static_cast<c10::DeviceIndex>(device));
  const auto options = at::TensorOptions().dtype(at::kFloat).device(where);
  if (strides) {
    return at::for_blob(fake_storage, sizes).strides(*strides).target_device(where).options(options).make_tensor();
  }
  return at::for_blob(fake_storage, sizes).target_device(where).options(options).make_tensor();
}

TEST(NcclChecks, AcceptsAContiguousTensorOnTheCommunicatorsDevice) {
  EXPECT_NO_THROW(accelerate::detail::check_nccl_tensor(fake_cuda_tensor(0, {4, 2}), 0, "all_reduce", "input"));
  EXPECT_NO_THROW(accelerate::detail::check_nccl_tensor(fake_cuda_tensor(3, {8}), 3, "all_gather", "output"));
}

TEST(NcclChecks, RejectsCpuTensors) {
  const at::Tensor cpu = at::zeros({4});
  const std::string message = message_of<accelerate::ConfigError>(
      [&] { accelerate::detail::check_nccl_tensor(cpu, 0, "all_reduce", "input"); });
  EXPECT_NE(message.find("all_reduce: the input tensor is on cpu"), std::string::npos) << message;
  EXPECT_NE(message.find("cuda:0"), std::string::npos) << message;
}

TEST(NcclChecks, RejectsTensorsOnAnotherGpu) {
  const std::string message = message_of<accelerate::ConfigError>(
      [] { accelerate::detail::check_nccl_tensor(fake_cuda_tensor(1, {4}), 0, "broadcast", "input"); });
  EXPECT_NE(message.find("is on cuda:1"), std::string::npos) << message;
  EXPECT_NE(message.find("uses cuda:0"), std::string::npos) << message;
}

TEST(NcclChecks, RejectsNonContiguousTensorsAndSaysWhatToDo) {
  const at::Tensor transposed = fake_cuda_tensor(0, {2, 4}, at::IntArrayRef{1, 2});
  ASSERT_FALSE(transposed.is_contiguous());
  const std::string message = message_of<accelerate::ConfigError>(
      [&] { accelerate::detail::check_nccl_tensor(transposed, 0, "all_gather", "output"); });
  EXPECT_NE(message.find("not contiguous"), std::string::npos) << message;
  EXPECT_NE(message.find(".contiguous()"), std::string::npos) << message;
}

TEST(NcclChecks, RejectsUndefinedTensors) {
  const std::string message = message_of<accelerate::ConfigError>(
      [] { accelerate::detail::check_nccl_tensor(at::Tensor(), 0, "scatter", "output"); });
  EXPECT_NE(message.find("scatter: the output tensor is undefined"), std::string::npos) << message;
}

// --- NcclComm bookkeeping ---------------------------------------------------------

TEST(NcclCommRaii, AbortRecordsTheReasonAndMovesWithTheOwner) {
  accelerate::detail::NcclComm comm;
  EXPECT_EQ(comm.get(), nullptr);
  EXPECT_FALSE(comm.aborted());
  EXPECT_EQ(comm.async_error(), ncclSuccess);
  comm.abort("timeout of all_reduce");
  comm.abort("a second reason");  // idempotent: the first reason stays
  EXPECT_TRUE(comm.aborted());
  EXPECT_EQ(comm.abort_reason(), "timeout of all_reduce");
  accelerate::detail::NcclComm moved(std::move(comm));
  EXPECT_TRUE(moved.aborted());
  EXPECT_EQ(moved.abort_reason(), "timeout of all_reduce");
  EXPECT_EQ(moved.get(), nullptr);
}

// --- make_nccl_backend's errors -------------------------------------------------

accelerate::detail::TimeoutPolicy quick_policy() { return {std::chrono::milliseconds(20000), false}; }

TEST(NcclBackendCreation, WithoutAGpuEveryRankFailsClearlyAndPromptly) {
  if (!on_every_rank(visible_gpus() == 0)) GTEST_SKIP() << "a GPU is visible; this covers machines without one";
  const auto start = std::chrono::steady_clock::now();
  bool threw = false;
  try {
    accelerate::detail::make_nccl_backend(MPI_COMM_WORLD, 0, "world", quick_policy());
  } catch (const accelerate::Error& error) {
    threw = true;
    // cudaGetDeviceCount failing is a CudaError, zero devices a ConfigError.
    EXPECT_TRUE(dynamic_cast<const accelerate::CudaError*>(&error) != nullptr ||
                dynamic_cast<const accelerate::ConfigError*>(&error) != nullptr)
        << error.what();
    const std::string message = error.what();
    EXPECT_NE(message.find("make_nccl_backend (group 'world')"), std::string::npos) << message;
    EXPECT_NE(message.find("GPU cuda:0"), std::string::npos) << message;
    EXPECT_NE(message.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << message;
    EXPECT_NE(message.find("ACCELERATE_USE_CPU=1"), std::string::npos) << message;
  }
  EXPECT_TRUE(threw);
  EXPECT_TRUE(on_every_rank(threw)) << "some rank did not fail";
  // Not a wait for a deadline: the ranks failed on their own checks.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(NcclBackendCreation, NegativeDeviceIsAConfigErrorOnEveryRank) {
  const std::string message = message_of<accelerate::ConfigError>(
      [] { accelerate::detail::make_nccl_backend(MPI_COMM_WORLD, -1, "world", quick_policy()); });
  EXPECT_NE(message.find("device index -1"), std::string::npos) << message;
}

TEST(NcclBackendCreation, OneRanksBadDeviceFailsEveryRankWithoutAHang) {
  // Rank 0 asks for an impossible device. Without the ranks' agreement the
  // others would wait for rank 0's unique id until the deadline (a
  // TimeoutError after 20 s); with it, they fail at once.
  const int rank = world_rank();
  const bool gpus_for_all = on_every_rank(visible_gpus() > 0);
  const auto start = std::chrono::steady_clock::now();
  const std::string message = message_of<accelerate::Error>([&] {
    accelerate::detail::make_nccl_backend(MPI_COMM_WORLD, rank == 0 ? -1 : 0, "world", quick_policy());
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  if (rank == 0) {
    EXPECT_NE(message.find("device index -1"), std::string::npos) << message;
  } else if (gpus_for_all) {
    EXPECT_NE(message.find("rank(s) 0 of the group have no usable GPU"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("GPU cuda:0"), std::string::npos) << message;  // their own no-GPU error
  }
}

// --- the caller's stream ----------------------------------------------------------

#if ACCELERATE_TORCH_CUDA_STREAMS
TEST(NcclStreams, CallerStreamIsLibTorchsCurrentStream) {
  if (visible_gpus() == 0) GTEST_SKIP() << "needs a GPU";
  using accelerate::detail::caller_stream;
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, 0);
  EXPECT_EQ(caller_stream(0), c10::cuda::getCurrentCUDAStream(0).stream());
  {
    const c10::cuda::CUDAStreamGuard guard(side);
    EXPECT_EQ(caller_stream(0), side.stream());
  }
  EXPECT_NE(caller_stream(0), side.stream()) << "the guard restored the previous stream";
}
#else
TEST(NcclStreams, WithoutLibTorchCudaTheCallerStreamIsTheDefaultStream) {
  // Needs no GPU: the fallback only names a stream.
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
  EXPECT_EQ(accelerate::detail::caller_stream(0), cudaStreamPerThread);
#else
  EXPECT_EQ(accelerate::detail::caller_stream(0), cudaStreamLegacy);
#endif
}
#endif

// --- sub-groups -----------------------------------------------------------------

TEST(NcclSplit, TheParentMustBeAnNcclBackend) {
  accelerate::detail::MpiBackend mpi(MPI_COMM_WORLD, "world", quick_policy());
  const std::string message = message_of<accelerate::ConfigError>([&] {
    accelerate::detail::split_nccl_backend(mpi, MPI_COMM_WORLD, MPI_COMM_WORLD, "half", quick_policy());
  });
  EXPECT_NE(message.find("the parent backend is 'mpi'"), std::string::npos) << message;
}

// --- collectives: one GPU per rank ---------------------------------------------

// Options without designated initialisers (GCC 12's -Wextra flags the
// fields they leave out).
accelerate::AllReduceOptions reducing(ReduceOp op) {
  accelerate::AllReduceOptions options;
  options.op = op;
  return options;
}

template <typename Options>
Options rooted(int root) {
  Options options;
  options.root = root;
  return options;
}

class NcclCollectives : public testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int local_size = 1;
    MPI_Comm_rank(node, &device_);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
    const int gpus = visible_gpus();
    if (!on_every_rank(gpus >= local_size)) {
      GTEST_SKIP() << "needs one GPU per rank; cudaGetDeviceCount reports " << gpus << " for " << local_size
                   << " rank(s) on this node";
    }
    backend_ = accelerate::detail::make_nccl_backend(MPI_COMM_WORLD, device_, "world", quick_policy());
    rank_ = backend_->rank();
    size_ = backend_->size();
  }

  /// A copy of the CPU tensor `host` on this rank's GPU, freed with cudaFree.
  /// Built without LibTorch's CUDA API, so it works with a CPU-only LibTorch.
  [[nodiscard]] at::Tensor upload(const at::Tensor& host) const {
    const at::Tensor source = host.contiguous();
    const std::size_t bytes = static_cast<std::size_t>(source.numel()) * source.element_size();
    void* data = nullptr;
    EXPECT_EQ(cudaSetDevice(device_), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&data, bytes == 0 ? 1 : bytes), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data, source.data_ptr(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    const c10::Device where(c10::kCUDA, static_cast<c10::DeviceIndex>(device_));
    return at::for_blob(data, source.sizes())
        .deleter([](void* pointer) { cudaFree(pointer); })
        .target_device(where)
        .options(source.options().device(where))
        .make_tensor();
  }
  /// A zeroed GPU tensor shaped like `sizes`.
  [[nodiscard]] at::Tensor device_zeros(at::IntArrayRef sizes, at::ScalarType type) const {
    return upload(at::zeros(sizes, at::TensorOptions().dtype(type)));
  }
  [[nodiscard]] static at::Tensor download(const at::Tensor& tensor) {
    at::Tensor host = at::empty(tensor.sizes(), tensor.options().device(c10::kCPU));
    const std::size_t bytes = static_cast<std::size_t>(tensor.numel()) * tensor.element_size();
    EXPECT_EQ(cudaMemcpy(host.data_ptr(), tensor.data_ptr(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

  int device_ = 0;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<accelerate::Backend> backend_;
};

TEST_F(NcclCollectives, AllReduceSumAndAvg) {
  at::Tensor sum = upload(at::full({1000}, rank_ + 1.0F));
  at::Tensor avg = upload(at::full({1000}, rank_ + 1.0F));
  backend_->all_reduce(sum, reducing(ReduceOp::Sum))->wait();
  backend_->all_reduce(avg, reducing(ReduceOp::Avg))->wait();
  EXPECT_TRUE(at::equal(download(sum), at::full({1000}, size_ * (size_ + 1) / 2.0F)));
  EXPECT_TRUE(at::allclose(download(avg), at::full({1000}, (size_ + 1) / 2.0F)));
}

TEST_F(NcclCollectives, AllReduceIntegersMinAndMax) {
  at::Tensor low = upload(at::full({7}, rank_ + 10, at::kLong));
  at::Tensor high = upload(at::full({7}, rank_ + 10, at::kInt));
  backend_->all_reduce(low, reducing(ReduceOp::Min))->wait();
  backend_->all_reduce(high, reducing(ReduceOp::Max))->wait();
  EXPECT_TRUE(at::equal(download(low), at::full({7}, 10, at::kLong)));
  EXPECT_TRUE(at::equal(download(high), at::full({7}, size_ + 9, at::kInt)));
}

TEST_F(NcclCollectives, BoolSumIsOrAndProductIsAnd) {
  at::Tensor any = upload(at::full({5}, rank_ == 0, at::kBool));
  at::Tensor every = upload(at::full({5}, true, at::kBool));
  at::Tensor all = upload(at::full({5}, rank_ == 0, at::kBool));
  backend_->all_reduce(any, reducing(ReduceOp::Sum))->wait();
  backend_->all_reduce(every, reducing(ReduceOp::Sum))->wait();
  backend_->all_reduce(all, reducing(ReduceOp::Product))->wait();
  EXPECT_TRUE(at::equal(download(any), at::ones({5}, at::kBool)));
  // The stored bytes must stay 0 or 1: a uint8 sum of trues would hold the rank count.
  at::Tensor bytes = at::empty({5}, at::kByte);
  ASSERT_EQ(cudaMemcpy(bytes.data_ptr(), every.data_ptr(), 5, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(at::equal(bytes, at::ones({5}, at::kByte)));
  EXPECT_TRUE(at::equal(download(all), at::full({5}, size_ == 1, at::kBool)));
}

TEST_F(NcclCollectives, BroadcastFromTheLastRank) {
  at::Tensor tensor = upload(at::full({3, 4}, rank_, at::kDouble));
  backend_->broadcast(tensor, rooted<accelerate::BroadcastOptions>(size_ - 1))->wait();
  EXPECT_TRUE(at::equal(download(tensor), at::full({3, 4}, size_ - 1, at::kDouble)));
}

TEST_F(NcclCollectives, AllGatherAndAllGatherV) {
  const at::Tensor input = upload(at::full({2, 3}, rank_, at::kFloat));
  at::Tensor output = device_zeros({2 * size_, 3}, at::kFloat);
  backend_->all_gather(output, input, {})->wait();
  std::vector<at::Tensor> blocks;
  for (int r = 0; r < size_; ++r) blocks.push_back(at::full({2, 3}, r, at::kFloat));
  EXPECT_TRUE(at::equal(download(output), at::cat(blocks)));

  // Rank r contributes r + 1 rows.
  std::vector<int64_t> counts;
  std::vector<at::Tensor> rows;
  for (int r = 0; r < size_; ++r) {
    counts.push_back(r + 1);
    rows.push_back(at::full({r + 1, 3}, r, at::kFloat));
  }
  const at::Tensor varying = upload(rows[static_cast<std::size_t>(rank_)]);
  const at::Tensor expected = at::cat(rows);
  at::Tensor gathered = device_zeros(expected.sizes(), at::kFloat);
  backend_->all_gather_v(gathered, varying, counts, {})->wait();
  EXPECT_TRUE(at::equal(download(gathered), expected));
}

TEST_F(NcclCollectives, GatherToTheLastRankAndScatterFromTheFirst) {
  const at::Tensor input = upload(at::full({4}, rank_, at::kInt));
  at::Tensor output = device_zeros({4 * size_}, at::kInt);
  backend_->gather(output, input, rooted<accelerate::GatherOptions>(size_ - 1))->wait();
  if (rank_ == size_ - 1) {
    EXPECT_TRUE(at::equal(download(output), at::arange(size_, at::kInt).repeat_interleave(4)));
  }

  const at::Tensor source = upload(at::arange(4 * size_, at::kInt));
  at::Tensor mine = device_zeros({4}, at::kInt);
  backend_->scatter(mine, source, rooted<accelerate::ScatterOptions>(0))->wait();
  EXPECT_TRUE(at::equal(download(mine), at::arange(4 * rank_, 4 * rank_ + 4, at::kInt)));
}

TEST_F(NcclCollectives, ReduceScatterAndAllToAll) {
  const at::Tensor input = upload(at::arange(3 * size_, at::kFloat));
  at::Tensor block = device_zeros({3}, at::kFloat);
  backend_->reduce_scatter(block, input, {})->wait();  // Sum, the default
  EXPECT_TRUE(at::equal(download(block), at::arange(3 * rank_, 3 * rank_ + 3, at::kFloat) * size_));

  // Rank r sends value 100 r + s to rank s, so rank s receives 100 r + s from each r.
  const at::Tensor sends = upload((at::arange(size_, at::kLong) + 100 * rank_).repeat_interleave(2));
  at::Tensor received = device_zeros({2 * size_}, at::kLong);
  backend_->all_to_all(received, sends, {})->wait();
  EXPECT_TRUE(at::equal(download(received), (at::arange(size_, at::kLong) * 100 + rank_).repeat_interleave(2)));
}

TEST_F(NcclCollectives, BarrierCompletesAndIsCompletedAfterWait) {
  auto work = backend_->barrier({});
  work->wait();
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(work->exception(), nullptr);
}

TEST_F(NcclCollectives, CpuTensorsAreRejectedBeforeAnythingIsEnqueued) {
  at::Tensor cpu = at::ones({4});
  const std::string message = message_of<accelerate::ConfigError>([&] { backend_->all_reduce(cpu, {}); });
  EXPECT_NE(message.find("on cpu"), std::string::npos) << message;
  backend_->barrier({})->wait();  // the communicator is still in step on every rank
}

TEST_F(NcclCollectives, TimeoutAbortsTheCommunicatorAndNamesTheOperation) {
  if (size_ < 2) GTEST_SKIP() << "a timeout needs a rank that does not arrive";
  if (rank_ == 0) {
    at::Tensor tensor = upload(at::ones({16}));
    accelerate::AllReduceOptions options;
    options.timeout = std::chrono::milliseconds(1000);
    auto work = backend_->all_reduce(tensor, options);
    const std::string message = message_of<accelerate::TimeoutError>([&] { work->wait(); });
    EXPECT_NE(message.find("all_reduce(sum) Float[16]"), std::string::npos) << message;
    EXPECT_NE(message.find("group 'world'"), std::string::npos) << message;
    EXPECT_NE(message.find("did not complete after"), std::string::npos) << message;
    EXPECT_NE(message.find("ncclCommAbort"), std::string::npos) << message;
    // The aborted communicator refuses new work instead of hanging.
    const std::string refused = message_of<accelerate::NcclError>([&] { backend_->barrier({}); });
    EXPECT_NE(refused.find("aborted"), std::string::npos) << refused;
  } else {
    // The peers of an aborted communicator cannot finalize theirs cleanly;
    // leave it to the end of the process.
    (void)backend_.release();
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(NcclCollectives, SubGroupOfTheBackendCarriesTensorsAndLeavesTheParentInStep) {
  // The even ranks, in reverse order; ncclCommSplit with NCCL 2.18+, else
  // the members bootstrap (split_nccl_backend decides; both must work).
  std::vector<int> members;
  for (int r = size_ - 1; r >= 0; --r) {
    if (r % 2 == 0) members.push_back(r);
  }
  const auto where = std::find(members.begin(), members.end(), rank_);
  const bool member = where != members.end();
  MPI_Comm member_comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, static_cast<int>(where - members.begin()),
                 &member_comm);
  auto sub = accelerate::detail::split_nccl_backend(*backend_, MPI_COMM_WORLD, member_comm, "evens", quick_policy());
  if (member) {
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->rank(), where - members.begin());
    EXPECT_EQ(sub->size(), static_cast<int>(members.size()));
    at::Tensor tensor = upload(at::full({8}, rank_ + 1.0F));
    sub->all_reduce(tensor, reducing(ReduceOp::Sum))->wait();
    float expected = 0;
    for (int r : members) expected += r + 1.0F;
    EXPECT_TRUE(at::equal(download(tensor), at::full({8}, expected)));
    sub.reset();
    MPI_Comm_free(&member_comm);
  } else {
    EXPECT_EQ(sub, nullptr);
  }
  backend_->barrier({})->wait();
}

#if ACCELERATE_TORCH_CUDA_STREAMS
// Keeps the current stream busy for a while (milliseconds on any GPU), so
// that work queued behind it would visibly lose a race with a collective
// that is not ordered after it.
void keep_current_stream_busy(const c10::Device& gpu) {
  const auto options = at::TensorOptions().dtype(at::kFloat).device(gpu);
  const at::Tensor a = at::rand({2048, 2048}, options);
  at::Tensor product = at::empty({2048, 2048}, options);
  for (int i = 0; i < 24; ++i) at::mm_out(product, a, a);
}

TEST_F(NcclCollectives, CollectiveOnAPoolStreamFollowsTheKernelThatWroteItsInput) {
  // With the default stream standing in for the caller's, the collective
  // would start before the fill below (queued behind milliseconds of matrix
  // products on a non-blocking pool stream) and reduce zeros.
  const c10::Device gpu(c10::kCUDA, static_cast<c10::DeviceIndex>(device_));
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(device_));
  const c10::cuda::CUDAStreamGuard guard(side);
  at::Tensor tensor = at::zeros({1 << 20}, at::TensorOptions().dtype(at::kFloat).device(gpu));
  keep_current_stream_busy(gpu);
  tensor.fill_(rank_ + 1.0F);  // the kernel writing the input, on `side`
  backend_->all_reduce(tensor, reducing(ReduceOp::Sum))->wait();
  EXPECT_TRUE(at::equal(tensor.cpu(), at::full({1 << 20}, size_ * (size_ + 1) / 2.0F)));
}

TEST_F(NcclCollectives, WaitOrdersTheStreamCurrentAtWaitNotTheOneAtPost) {
  // Posted while the default stream is current, waited for while a pool
  // stream is: work queued on the pool stream after wait() sees the result.
  // (wait() also blocks the host until the collective finished, so this
  // checks the contract's outcome; CallerStreamIsLibTorchsCurrentStream
  // checks the stream that wait() orders.)
  const c10::Device gpu(c10::kCUDA, static_cast<c10::DeviceIndex>(device_));
  at::Tensor tensor = at::full({1 << 20}, rank_ + 1.0F, at::TensorOptions().dtype(at::kFloat).device(gpu));
  auto work = backend_->all_reduce(tensor, reducing(ReduceOp::Sum));
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(device_));
  const c10::cuda::CUDAStreamGuard guard(side);
  work->wait();
  const at::Tensor doubled = tensor * 2;  // queued on `side`
  EXPECT_TRUE(at::equal(doubled.cpu(), at::full({1 << 20}, static_cast<float>(size_ * (size_ + 1)))));
  EXPECT_TRUE(work->is_completed());
}
#endif

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
