// The checking macros turn real failures of MPI, CUDA, NCCL and HDF5 calls
// into typed exceptions whose message names the rank, the call and a remedy.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "detail/mpi_check.hpp"
#include "detail/mpi_wait.hpp"
#if ACCELERATE_HAVE_CUDA
#include "detail/cuda_check.hpp"
#endif
#if ACCELERATE_HAVE_NCCL
#include "detail/nccl_check.hpp"
#endif
#if ACCELERATE_HAVE_HDF5
#include "detail/hdf5_check.hpp"
#endif

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(MpiCheck, ErrorNamesRankCallAndMpiText) {
  MPI_Comm comm = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), MPI_SUCCESS);
  int value = 1;
  try {
    ACCELERATE_MPI_CHECK(MPI_Send(&value, 1, MPI_INT, 12345, 0, comm));
    FAIL() << "expected MpiError";
  } catch (const accelerate::MpiError& error) {
    const std::string text = error.what();
    EXPECT_TRUE(contains(text, "[rank 0/1 on ")) << text;
    EXPECT_TRUE(contains(text, "MPI_Send(&value, 1, MPI_INT, 12345, 0, comm)")) << text;
    EXPECT_TRUE(contains(text, "check_macros_test.cpp:")) << text;
    EXPECT_NE(error.code(), MPI_SUCCESS);
    int error_class = 0;
    MPI_Error_class(error.code(), &error_class);
    EXPECT_EQ(error_class, MPI_ERR_RANK);
  }
  MPI_Comm_free(&comm);
}

TEST(MpiCheck, SuccessDoesNotThrow) {
  int rank = -1;
  EXPECT_NO_THROW(ACCELERATE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank)));
  EXPECT_EQ(rank, 0);
}

TEST(MpiWait, UnfinishedRequestTimesOutWithGuidance) {
  int value = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  ASSERT_EQ(MPI_Irecv(&value, 1, MPI_INT, 0, 77, MPI_COMM_WORLD, &request), MPI_SUCCESS);
  try {
    accelerate::detail::wait_with_timeout(request, std::chrono::milliseconds(200), "test receive", MPI_COMM_WORLD);
    FAIL() << "expected TimeoutError";
  } catch (const accelerate::TimeoutError& error) {
    const std::string text = error.what();
    EXPECT_TRUE(contains(text, "test receive did not complete within 200 ms")) << text;
    EXPECT_TRUE(contains(text, "ACCELERATE_TIMEOUT")) << text;
  }
  MPI_Cancel(&request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
}

TEST(MpiWait, FinishedRequestReturns) {
  MPI_Request request = MPI_REQUEST_NULL;
  ASSERT_EQ(MPI_Ibarrier(MPI_COMM_WORLD, &request), MPI_SUCCESS);
  EXPECT_NO_THROW(
      accelerate::detail::wait_with_timeout(request, std::chrono::milliseconds(5000), "barrier", MPI_COMM_WORLD));
}

TEST(FeatureNotBuilt, MessageGivesTheRebuildHint) {
  try {
    accelerate::detail::throw_feature_not_built("NCCL", "all_reduce on a CUDA tensor", "ACCELERATE_WITH_NCCL");
    FAIL() << "expected FeatureNotBuilt";
  } catch (const accelerate::FeatureNotBuilt& error) {
    const std::string text = error.what();
    EXPECT_TRUE(contains(text, "all_reduce on a CUDA tensor needs NCCL")) << text;
    EXPECT_TRUE(contains(text, "-DACCELERATE_WITH_NCCL=ON")) << text;
    EXPECT_TRUE(contains(text, "accelerate-hpc+nccl")) << text;
  }
}

#if ACCELERATE_HAVE_CUDA
TEST(CudaCheck, MissingDeviceSaysWhatToDo) {
  // No machine has a millionth GPU; without a driver the call fails earlier,
  // with the same advice.
  try {
    ACCELERATE_CUDA_CHECK(cudaSetDevice(1 << 20));
    FAIL() << "expected CudaError";
  } catch (const accelerate::CudaError& error) {
    const std::string text = error.what();
    EXPECT_TRUE(contains(text, "cudaSetDevice(1 << 20)")) << text;
    EXPECT_TRUE(contains(text, "CUDA_VISIBLE_DEVICES")) << text;
    EXPECT_NE(error.code(), 0);
  }
}
#endif

#if ACCELERATE_HAVE_NCCL
TEST(NcclCheck, InvalidArgumentCarriesNcclText) {
  int count = 0;
  try {
    ACCELERATE_NCCL_CHECK(ncclCommCount(nullptr, &count), nullptr);
    FAIL() << "expected NcclError";
  } catch (const accelerate::NcclError& error) {
    const std::string text = error.what();
    EXPECT_TRUE(contains(text, "ncclCommCount(nullptr, &count)")) << text;
    EXPECT_TRUE(contains(text, ncclGetErrorString(static_cast<ncclResult_t>(error.code())))) << text;
    EXPECT_TRUE(contains(text, "NCCL 2.")) << text;
  }
}

TEST(NcclCheck, UniqueIdWorksWithoutAGpu) {
  ncclUniqueId id;
  EXPECT_NO_THROW(ACCELERATE_NCCL_CHECK(ncclGetUniqueId(&id), nullptr));
}
#endif

#if ACCELERATE_HAVE_HDF5
TEST(Hdf5Check, MissingFileNamesTheFileAndTheStack) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const std::string path = "no-such-dir/checkpoint.h5";
  try {
    ACCELERATE_HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path);
    FAIL() << "expected Hdf5Error";
  } catch (const accelerate::Hdf5Error& error) {
    const std::string text = error.what();
    EXPECT_TRUE(contains(text, "'no-such-dir/checkpoint.h5'")) << text;
    EXPECT_TRUE(contains(text, "H5Fopen")) << text;
    EXPECT_TRUE(contains(text, "h5ls")) << text;
  }
}
#endif

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
