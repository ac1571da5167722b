// A build without HDF5 (ACCELERATE_WITH_HDF5=OFF): every checkpoint entry
// point links and fails at run time, on every rank, with FeatureNotBuilt
// naming the call and the option to rebuild with. Registered only in such
// builds (tests/mpi/checkpoint.cmake).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/checkpoint/checkpoint_writer.hpp"
#include "accelerate/error.hpp"
#include "accelerate/training/accelerator.hpp"
#include "common/test_helpers.hpp"

namespace ACCELERATE_TEST_FILE_ID {
namespace {

namespace acc = accelerate;

void expect_not_built(const std::string& message, const std::string& call) {
  EXPECT_NE(message.find(call), std::string::npos) << message;
  EXPECT_NE(message.find("ACCELERATE_WITH_HDF5=ON"), std::string::npos) << message;
  EXPECT_NE(message.find("accelerate-hpc+hdf5"), std::string::npos) << message;
}

TEST(CheckpointWithoutHdf5, TheAcceleratorsCheckpointCallsThrowFeatureNotBuilt) {
  acc::Accelerator accelerator;
  torch::nn::Linear net(2, 1);
  auto model = accelerator.prepare(net);
  using acc::testing::error_of;
  expect_not_built(error_of<acc::FeatureNotBuilt>([&] { accelerator.save_state("unused"); }),
                   "Accelerator::save_state");
  expect_not_built(error_of<acc::FeatureNotBuilt>([&] { accelerator.load_state("unused"); }),
                   "Accelerator::load_state");
  expect_not_built(error_of<acc::FeatureNotBuilt>([&] { (void)accelerator.latest_checkpoint(); }),
                   "Accelerator::latest_checkpoint");
  // Nothing collective was left half done: the ranks still agree.
  EXPECT_NO_THROW(accelerator.wait_for_everyone());
}

TEST(CheckpointWithoutHdf5, WriterAndReaderThrowFeatureNotBuilt) {
  using acc::testing::error_of;
  expect_not_built(error_of<acc::FeatureNotBuilt>([] {
                     acc::checkpoint::CheckpointWriter writer({.file = "unused.h5"}, {});
                   }),
                   "CheckpointWriter");
  expect_not_built(error_of<acc::FeatureNotBuilt>([] {
                     acc::checkpoint::CheckpointReader reader({.file = "unused.h5"});
                   }),
                   "CheckpointReader");
}

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
