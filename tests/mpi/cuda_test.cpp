// The CUDA paths of the State, AMP, data, RNG and training layers on a real
// GPU, at 1 and 2 ranks (two ranks share one GPU when only one is visible:
// nothing here reaches NCCL).
//
// Every case needs a GPU and skips, on every rank alike, without one (the
// machines that run CI have none; docs/gpu.md says where they ran). The
// cases that read LibTorch's caching allocator also need a CUDA LibTorch
// (config::torch_cuda_streams).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "accelerate/amp/autocast.hpp"
#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/config.hpp"
#include "accelerate/runtime/device_memory.hpp"
#include "accelerate/training/accelerator.hpp"
#include "accelerate/training/find_executable_batch_size.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
using acc::testing::world_size;

int visible_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

/// The same answer on every rank: a skip must not leave a rank in a collective.
bool every_rank_sees_a_gpu() {
  int mine = visible_gpus() > 0 ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

#define SKIP_WITHOUT_GPU()                                                              \
  do {                                                                                 \
    if (!every_rank_sees_a_gpu()) GTEST_SKIP() << "needs a CUDA GPU on every rank";    \
  } while (false)

// Gradients and parameter broadcasts of CUDA tensors go through NCCL, which
// refuses two ranks of one communicator on the same GPU.
#define SKIP_UNLESS_A_GPU_PER_RANK()                                                           \
  do {                                                                                        \
    SKIP_WITHOUT_GPU();                                                                       \
    if (world_size() > visible_gpus()) GTEST_SKIP() << "needs a GPU per rank (NCCL refuses shared GPUs)"; \
  } while (false)

int local_rank() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  return rank;
}

TEST(CudaDevice, EachRankIsBoundToItsLocalGpu) {
  SKIP_WITHOUT_GPU();
  acc::Accelerator accelerator;
  const int expected = local_rank() % visible_gpus();
  EXPECT_EQ(accelerator.device().str(), "cuda:" + std::to_string(expected));
  // A tensor made on "cuda" without an index lands on the current device.
  const auto probe = torch::zeros({1}, torch::Device(torch::kCUDA));
  EXPECT_EQ(probe.device().index(), expected);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, expected);
}

TEST(CudaAutocast, MatmulsRunInTheReducedTypeAndOthersStayFp32) {
  SKIP_WITHOUT_GPU();
  acc::Accelerator accelerator;
  const auto a = torch::randn({64, 64}, torch::Device(accelerator.device()));
  const auto b = torch::randn({64, 64}, torch::Device(accelerator.device()));
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    acc::AutocastGuard guard(c10::DeviceType::CUDA, dtype);
    const auto product = torch::mm(a, b);
    EXPECT_EQ(product.scalar_type(), dtype);
    // softmax is on autocast's fp32 list: it must come back in fp32.
    EXPECT_EQ(torch::softmax(product, 1).scalar_type(), torch::kFloat);
  }
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
  // The Accelerator's own scope for mixed_precision = "bf16".
  acc::Accelerator bf16({.mixed_precision = "bf16"});
  {
    auto scope = bf16.autocast();
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
}

struct Line : torch::nn::Module {
  Line() { fc = register_module("fc", torch::nn::Linear(4, 1)); }
  torch::Tensor forward(const torch::Tensor& x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};

TEST(CudaGradScaler, ARealFp16OverflowSkipsTheStepAndBacksOff) {
  SKIP_UNLESS_A_GPU_PER_RANK();
  acc::Accelerator accelerator({.mixed_precision = "fp16"});
  torch::manual_seed(3);
  auto net = std::make_shared<Line>();
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  ASSERT_NE(accelerator.scaler(), nullptr);
  ASSERT_TRUE(net->fc->weight.is_cuda());
  const double scale_before = accelerator.scaler()->get_scale();

  // 4 inputs of 3e4 through an fp16 linear layer: the sum passes fp16's
  // 65504 for weights near 1, and the loss (its square) is inf in any case.
  const auto huge = torch::full({8, 4}, 3.0e4, torch::Device(accelerator.device()));
  {
    torch::NoGradGuard no_grad;
    net->fc->weight.fill_(1.0);
  }
  const auto weight_overflow = net->fc->weight.detach().clone();
  {
    auto scope = accelerator.autocast();
    const auto out = model->forward<Line>(huge);
    EXPECT_EQ(out.scalar_type(), torch::kHalf);
    const auto loss = out.pow(2).mean();
    accelerator.backward(loss);
  }
  optimizer->step();
  optimizer->zero_grad();
  EXPECT_TRUE(accelerator.optimizer_step_was_skipped());
  EXPECT_TRUE(torch::equal(net->fc->weight.detach(), weight_overflow)) << "a step with inf gradients was applied";
  EXPECT_EQ(accelerator.scaler()->get_scale(), scale_before * 0.5);

  // A finite step afterwards is applied and keeps the scale.
  const auto small = torch::randn({8, 4}, torch::Device(accelerator.device()));
  {
    auto scope = accelerator.autocast();
    accelerator.backward(model->forward<Line>(small).to(torch::kFloat).pow(2).mean());
  }
  optimizer->step();
  optimizer->zero_grad();
  EXPECT_FALSE(accelerator.optimizer_step_was_skipped());
  EXPECT_FALSE(torch::equal(net->fc->weight.detach(), weight_overflow));
  EXPECT_EQ(accelerator.scaler()->get_scale(), scale_before * 0.5);
}

// Rows i of the dataset hold the value i: a batch's inputs and targets agree.
class IndexDataset : public torch::data::datasets::Dataset<IndexDataset> {
 public:
  torch::data::Example<> get(size_t i) override {
    const auto value = static_cast<double>(i);
    return {torch::full({3}, value), torch::full({1}, value)};
  }
  torch::optional<size_t> size() const override { return 64; }
};

TEST(CudaLoader, PinnedBatchesCopiedWithoutBlockingArriveIntact) {
  SKIP_WITHOUT_GPU();
  acc::Accelerator accelerator({.dataloader_config = {.non_blocking = true}});
  auto loader = accelerator.prepare(acc::data_loader(IndexDataset(), {.batch_size = 8, .pin_memory = true}));
  int64_t rows = 0;
  for (const auto& batch : *loader) {
    ASSERT_TRUE(batch.data.is_cuda());
    ASSERT_TRUE(batch.target.is_cuda());
    EXPECT_EQ(batch.data.device(), accelerator.device());
    // A copy read before it completed would show zeros or stale rows here.
    EXPECT_TRUE(torch::equal(batch.data.select(1, 0), batch.target.squeeze(1)));
    EXPECT_TRUE(torch::equal(batch.data.select(1, 2), batch.target.squeeze(1)));
    rows += batch.data.size(0);
  }
  EXPECT_EQ(rows, 64 / world_size());
}

#if ACCELERATE_HAVE_HDF5
TEST(CudaRng, SaveAndLoadStateRestoreTheCudaGeneratorBitExactly) {
  SKIP_UNLESS_A_GPU_PER_RANK();
  const auto dir = acc::testing::shared_temp_directory("cuda_rng");
  {
    acc::Accelerator accelerator({.project_config = {.project_dir = dir.string()}});
    auto net = std::make_shared<Line>();
    auto model = accelerator.prepare(net);
    const torch::Device device = accelerator.device();
    torch::cuda::manual_seed_all(1234 + acc::testing::world_rank());
    (void)torch::randn({100}, device);  // advance the generator past its seed
    const auto saved = accelerator.save_state(dir / "ckpt");
    const auto first = torch::randn({1000}, device);
    const auto dropout_first = torch::dropout(torch::ones({1000}, device), 0.5, true);
    (void)torch::randn({12345}, device);  // move on
    accelerator.load_state(saved);
    const auto again = torch::randn({1000}, device);
    const auto dropout_again = torch::dropout(torch::ones({1000}, device), 0.5, true);
    EXPECT_TRUE(torch::equal(first, again)) << "the CUDA generator did not come back bit-exactly";
    EXPECT_TRUE(torch::equal(dropout_first, dropout_again));
  }
  acc::testing::remove_shared_directory(dir);
}
#endif

TEST(CudaOutOfMemory, FindExecutableBatchSizeStepsDownFromARealOutOfMemory) {
  SKIP_WITHOUT_GPU();
  if (world_size() > 1) GTEST_SKIP() << "one rank: ranks sharing a GPU would race for its memory";
  acc::Accelerator accelerator;
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  const auto eighth = static_cast<int64_t>(free_bytes / 8);
  const torch::Device device = accelerator.device();
  std::vector<int64_t> tried;
  std::vector<std::uint64_t> reserved_at_start;
  // Each attempt holds an eighth of the free memory (activations) and then
  // asks for batch eighths more: 64, 32, 16 and 8 do not fit, 4 does.
  const int64_t found = accelerator.find_executable_batch_size(64, [&](int64_t batch) {
    tried.push_back(batch);
    reserved_at_start.push_back(acc::device_memory_reserved(device.index()));
    const auto activations = torch::empty({eighth}, torch::TensorOptions(torch::kByte).device(device));
    const auto rest = torch::empty({batch * eighth}, torch::TensorOptions(torch::kByte).device(device));
    return batch;
  });
  EXPECT_EQ(found, 4);
  EXPECT_EQ(tried, (std::vector<int64_t>{64, 32, 16, 8, 4}));
  if constexpr (acc::config::torch_cuda_streams) {
    // The activations block of a failed attempt is cached when it is freed;
    // without the cache cleared between attempts the next one starts with it.
    for (std::size_t i = 1; i < reserved_at_start.size(); ++i) {
      EXPECT_LT(reserved_at_start[i], static_cast<std::uint64_t>(eighth) / 2)
          << "attempt " << tried[i] << " started with the previous attempt's cache";
    }
  }
}

TEST(CudaMemory, ClearDeviceCacheGivesFreedBlocksBack) {
  SKIP_WITHOUT_GPU();
  if constexpr (!acc::config::torch_cuda_streams) {
    GTEST_SKIP() << "this LibTorch has no CUDA caching allocator to inspect";
  }
  acc::Accelerator accelerator;
  const int index = accelerator.device().index();
  constexpr int64_t kBytes = int64_t{1} << 30;
  { const auto block = torch::empty({kBytes}, torch::TensorOptions(torch::kByte).device(accelerator.device())); }
  EXPECT_GE(acc::device_memory_reserved(index), static_cast<std::uint64_t>(kBytes)) << "the freed block was not cached";
  acc::clear_device_cache();
  EXPECT_LT(acc::device_memory_reserved(index), static_cast<std::uint64_t>(kBytes));
}

TEST(CudaSharedGpu, AGroupOfRanksSharingAGpuCarriesCpuTensorsAndRefusesCudaOnes) {
  SKIP_WITHOUT_GPU();
  if (world_size() <= visible_gpus()) GTEST_SKIP() << "needs more ranks than GPUs";
  acc::Accelerator accelerator;  // NCCL would refuse this world; the group must still come up
  auto& group = accelerator.process_group();
  auto on_cpu = torch::ones({4});
  group.all_reduce(on_cpu);
  EXPECT_TRUE(torch::equal(on_cpu, torch::full({4}, static_cast<float>(world_size()))));
  auto on_gpu = torch::ones({4}, torch::Device(accelerator.device()));
  const std::string message = acc::testing::error_of<acc::ConfigError>([&] { group.all_reduce(on_gpu); });
  EXPECT_NE(message.find("share the GPU"), std::string::npos) << message;
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
#undef SKIP_WITHOUT_GPU
#undef SKIP_UNLESS_A_GPU_PER_RANK
