// Checkpoint files at 1, 2 and 4 ranks stay close to the bytes they hold:
// the file is at most its data + 10 % + 64 KiB (docs/checkpointing.md, "File
// size and padding"), while datasets of 16 MiB and more still start on a
// multiple of the alignment (1 MiB by default).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "accelerate/checkpoint/checkpoint_writer.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/training/accelerator.hpp"
#include "common/gpu_skip.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
namespace ckpt = accelerate::checkpoint;
namespace fs = std::filesystem;
using acc::testing::world_rank;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
// The allowance beyond 10 % of the data: HDF5's last, partly used metadata
// block (64 KiB) and the superblock and root attributes.
constexpr std::uint64_t kConstantAllowance = 64 * 1024;

herr_t add_dataset_bytes(hid_t group, const char* name, const H5L_info_t* /*info*/, void* total) {
  const hid_t object = H5Oopen(group, name, H5P_DEFAULT);
  if (object < 0) return -1;
  if (H5Iget_type(object) == H5I_DATASET) *static_cast<std::uint64_t*>(total) += H5Dget_storage_size(object);
  H5Oclose(object);
  return 0;
}

// The bytes of all datasets of `file` (what the file must hold at least).
std::uint64_t data_bytes(const fs::path& file) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0) << file;
  std::uint64_t total = 0;
  EXPECT_GE(H5Lvisit(f, H5_INDEX_NAME, H5_ITER_NATIVE, add_dataset_bytes, &total), 0) << file;
  H5Fclose(f);
  return total;
}

// Where the data of dataset `name` of `file` starts.
std::uint64_t offset_of(const fs::path& file, const std::string& name) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  EXPECT_NE(offset, HADDR_UNDEF) << name;
  return offset;
}

// Checked on rank 0, once every rank has closed the file.
void expect_small(const fs::path& file) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() != 0) return;
  const std::uint64_t data = data_bytes(file);
  const std::uint64_t size = fs::file_size(file);
  EXPECT_GT(data, 0U);
  EXPECT_LE(size, data + data / 10 + kConstantAllowance)
      << file << ": " << size << " bytes for " << data << " bytes of data (" << acc::testing::world_size()
      << " ranks); run h5stat -S on it";
}

// Sample values of `bytes` bytes (float32).
at::Tensor floats(std::uint64_t bytes, int seed) {
  return at::arange(static_cast<std::int64_t>(bytes / 4), at::kFloat).add(seed);
}

// A 1.2 MiB model of twelve 100 KiB layers: each weight was once padded to
// 1 MiB, which made its checkpoint 13.7 MB at two ranks.
struct TwelveLayers : torch::nn::Module {
  TwelveLayers() {
    torch::manual_seed(3);
    for (int i = 0; i < 12; ++i) register_module("layer" + std::to_string(i), torch::nn::Linear(160, 160));
  }
};

class CheckpointFileSize : public acc::testing::DefaultDeviceTest {};

TEST_F(CheckpointFileSize, SmallTrainingStateStaysSmall) {
  const fs::path dir = acc::testing::shared_temp_directory("file_size_state");
  {
    acc::Accelerator accelerator;
    auto model = accelerator.prepare(std::make_shared<TwelveLayers>());
    accelerator.save_state(dir / "ckpt");
  }
  expect_small(dir / "ckpt" / "state.h5");
  acc::testing::remove_shared_directory(dir);
}

// Tensors between 64 KiB and 16 MiB, split across the ranks above 1 MiB:
// packed one after the other.
TEST_F(CheckpointFileSize, MediumTensorsArePacked) {
  const fs::path dir = acc::testing::shared_temp_directory("file_size_medium");
  {
    ckpt::CheckpointWriter writer({.comm = MPI_COMM_WORLD, .file = dir / "state.h5"}, {});
    for (int i = 0; i < 6; ++i) {
      writer.write_replicated("model/medium" + std::to_string(i), floats(3 * kMiB / 2, i));
      writer.write_replicated("model/small" + std::to_string(i), floats(80 * 1024, i));
    }
    writer.write_per_rank("rng/state", floats(4096, world_rank()));
    writer.close();
  }
  expect_small(dir / "state.h5");
  acc::testing::remove_shared_directory(dir);
}

// Large datasets keep their alignment (file-system blocks, so that the ranks'
// 1 MiB shares share none), after small ones that leave the end of the file
// unaligned; the padding before them stays within the bound.
TEST_F(CheckpointFileSize, LargeTensorsStartOnAlignedOffsets) {
  const fs::path dir = acc::testing::shared_temp_directory("file_size_large");
  {
    ckpt::CheckpointWriter writer({.comm = MPI_COMM_WORLD, .file = dir / "state.h5"}, {});
    writer.write_replicated("model/a", floats(3000, 1));
    writer.write_replicated("model/large", floats(16 * kMiB, 2));
    writer.write_replicated("model/b", floats(100 * 1024, 3));
    writer.write_replicated("model/larger", floats(17 * kMiB + 4096, 4));
    writer.close();
  }
  // A smaller alignment lowers the size from which datasets are aligned too.
  {
    ckpt::CheckpointWriter writer({.comm = MPI_COMM_WORLD, .file = dir / "small_blocks.h5", .alignment = 64 * 1024},
                                  {});
    writer.write_replicated("model/a", floats(3000, 1));
    writer.write_replicated("model/large", floats(kMiB, 2));
    writer.close();
  }
  expect_small(dir / "state.h5");
  expect_small(dir / "small_blocks.h5");
  if (world_rank() == 0) {
    EXPECT_EQ(offset_of(dir / "state.h5", "model/large") % kMiB, 0U);
    EXPECT_EQ(offset_of(dir / "state.h5", "model/larger") % kMiB, 0U);
    EXPECT_EQ(offset_of(dir / "small_blocks.h5", "model/large") % (64 * 1024), 0U);
  }
  acc::testing::remove_shared_directory(dir);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
