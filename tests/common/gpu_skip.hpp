// Whether a test that trains on the default device can run in this world.
// With a GPU visible the Accelerator places every rank on
// cuda:<local rank % GPUs>, and NCCL refuses a communicator in which two
// ranks share one GPU (docs/gpu.md): on a machine with fewer GPUs than ranks
// such tests skip, with this reason, instead of failing on the refusal.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/cuda.h>

namespace accelerate::testing {

inline constexpr const char* kRanksShareAGpu =
    "more ranks than GPUs on a node: NCCL refuses ranks that share a GPU (one rank per GPU runs this test)";

/// Collective over MPI_COMM_WORLD; the same answer on every rank.
inline bool ranks_share_a_gpu() {
  const auto gpus = static_cast<int>(torch::cuda::device_count());
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int ranks_on_node = 1;
  MPI_Comm_size(node, &ranks_on_node);
  MPI_Comm_free(&node);
  int mine = (gpus > 0 && ranks_on_node > gpus) ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any != 0;
}

/// The fixture of tests that train on the default device: they skip, with
/// the reason, where ranks would share a GPU.
class DefaultDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ranks_share_a_gpu()) GTEST_SKIP() << kRanksShareAGpu;
  }
};

}  // namespace accelerate::testing
