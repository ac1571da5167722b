// KokkosRuntime adopting a Kokkos the program initialised itself: it never
// finalises it, however many runtimes come and go.
#include <gtest/gtest.h>

#include "accelerate/interop/kokkos.hpp"
#include "accelerate/runtime/state.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::kokkos::KokkosRuntime;

TEST(KokkosRuntimeAdopted, NeverFinalisesTheProgramsKokkos) {
  ASSERT_FALSE(Kokkos::is_initialized());
  Kokkos::initialize();  // the program's own, after MPI (initialised by the test main)
  accelerate::State state;
  for (int round = 0; round < 2; ++round) {
    KokkosRuntime runtime(state);
    EXPECT_FALSE(runtime.owns_kokkos());
    Kokkos::View<int*> view("v", 4);
    Kokkos::deep_copy(view, round + 1);
    EXPECT_EQ(accelerate::kokkos::to_tensor(view).sum().item<int>(), 4 * (round + 1));
  }
  EXPECT_TRUE(Kokkos::is_initialized());
  Kokkos::finalize();  // the program's responsibility
  EXPECT_FALSE(Kokkos::is_initialized());
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
