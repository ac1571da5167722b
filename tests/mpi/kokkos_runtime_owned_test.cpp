// KokkosRuntime initialising Kokkos itself: after MPI (the State), finalised
// when the runtime ends, and never a second time in the same process. The
// tests run in order in one process, as a program's life would.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "accelerate/interop/kokkos.hpp"
#include "accelerate/runtime/state.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::kokkos::KokkosRuntime;

TEST(KokkosRuntimeOwned, InitialisesAndFinalisesKokkos) {
  ASSERT_FALSE(Kokkos::is_initialized());
  accelerate::State state;
  // A tensor over an unmanaged view (memory Kokkos does not own) may safely
  // outlive Kokkos; the runtime still reports it as a tensor left alive.
  std::vector<double> buffer(4, 1.0);
  at::Tensor survivor;
  std::string report;
  {
    KokkosRuntime runtime(state, {.num_threads = 1});
    EXPECT_TRUE(runtime.owns_kokkos());
    EXPECT_TRUE(Kokkos::is_initialized());
    {
      // An adopting runtime inside the owning one leaves Kokkos running.
      KokkosRuntime inner(state);
      EXPECT_FALSE(inner.owns_kokkos());
    }
    EXPECT_TRUE(Kokkos::is_initialized());
    Kokkos::View<double*> view("v", 8);
    Kokkos::deep_copy(view, 2.0);
    at::Tensor tensor = accelerate::kokkos::to_tensor(view);
    EXPECT_EQ(tensor.sum().item<double>(), 16.0);
    Kokkos::View<double*, Kokkos::MemoryUnmanaged> unmanaged(buffer.data(), buffer.size());
    survivor = accelerate::kokkos::to_tensor(unmanaged);
    ::testing::internal::CaptureStderr();
  }  // view and tensor released before the runtime ends; `survivor` is not
  report = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(report.find("finalising Kokkos while 1 tensor(s) made by to_tensor still share view memory"),
            std::string::npos)
      << report;
  EXPECT_EQ(survivor.sum().item<double>(), 4.0);
  survivor = at::Tensor();
  EXPECT_FALSE(Kokkos::is_initialized());
  int mpi_finalized = 1;
  MPI_Finalized(&mpi_finalized);
  EXPECT_FALSE(mpi_finalized);  // MPI outlives Kokkos
}

TEST(KokkosRuntimeOwned, RefusesToInitialiseKokkosTwice) {
  accelerate::State state;
  const auto message = accelerate::testing::error_of([&] { KokkosRuntime again(state); });
  EXPECT_NE(message.find("initialised and finalised in this process"), std::string::npos) << message;
  EXPECT_FALSE(Kokkos::is_initialized());
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
