// The path where State starts MPI itself: it must finalise MPI when it is
// destroyed, and a later State must fail with a clear message instead of
// crashing inside MPI. Runs with gtest_main, so nobody else touches MPI.
#include <gtest/gtest.h>
#include <mpi.h>

#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"

namespace {

TEST(StateOwnsMpi, InitialisesThenFinalisesAndRefusesARestart) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  ASSERT_EQ(initialized, 0) << "this test needs a process where MPI has not been started";
  {
    const accelerate::State state;
    EXPECT_TRUE(state.owns_mpi());
    MPI_Initialized(&initialized);
    EXPECT_EQ(initialized, 1);
    EXPECT_GE(state.thread_level_provided(), accelerate::ThreadLevel::Funneled);
    state.wait_for_everyone();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 1);
  try {
    const accelerate::State again;
    FAIL() << "expected accelerate::Error";
  } catch (const accelerate::Error& error) {
    EXPECT_NE(std::string(error.what()).find("already been finalised"), std::string::npos) << error.what();
  }
}

}  // namespace
