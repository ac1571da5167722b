// BlockingCallWatchdog: a call blocked past its limit ends the process with
// exit code 3 and a report naming the call; a call that returns in time
// disarms it; a deadline wait of our own inside the watched call ends first
// and writes its report (it names the missing ranks), but not forever; the report carries the
// training step. Each case runs in a death-test child process.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "detail/blocking_call_watchdog.hpp"
#include "detail/job_step.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::detail::BlockingCallWatchdog;
using accelerate::detail::DeadlineWaitMark;
using accelerate::detail::kBlockedCallExitCode;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

TEST(BlockingCallWatchdog, EndsTheProcessWhenTheCallOverrunsItsLimit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const BlockingCallWatchdog watchdog("checkpoint: H5Fclose of 'x.h5'", 200ms);
        std::this_thread::sleep_for(20s);  // the stuck collective
        std::exit(0);
      },
      ::testing::ExitedWithCode(kBlockedCallExitCode),
      "checkpoint: H5Fclose of 'x.h5' did not return within 200 ms.*Ending this process with exit code 3");
}

TEST(BlockingCallWatchdog, ACallThatReturnsInTimeDisarmsIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        { const BlockingCallWatchdog quick("quick call", 100ms); }
        std::this_thread::sleep_for(500ms);  // well past the quick call's deadline
        std::exit(7);
      },
      ::testing::ExitedWithCode(7), "");
}

TEST(BlockingCallWatchdog, TheEarliestDeadlineFiresFirstAmongNestedCalls) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const BlockingCallWatchdog outer("outer call", 60s);
        const BlockingCallWatchdog inner("inner call", 200ms);
        std::this_thread::sleep_for(20s);
        std::exit(0);
      },
      ::testing::ExitedWithCode(kBlockedCallExitCode), "inner call did not return within 200 ms");
}

TEST(BlockingCallWatchdog, ARunningDeadlineWaitEndsBeforeIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const BlockingCallWatchdog watchdog("checkpoint: write_replicated of 'x.h5:/w'", 200ms);
        {
          // The wait's own deadline is later than the watchdog's: the wait
          // must be allowed to end (and report) by itself.
          const DeadlineWaitMark waiting(Clock::now() + 1s);
          std::this_thread::sleep_for(1500ms);
        }
        std::exit(0);  // the wait "threw": the watched scope unwinds and disarms
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(BlockingCallWatchdog, TheReportOfADeadlineWaitThatRanOutEndsBeforeIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const BlockingCallWatchdog watchdog("checkpoint: creating the file", 300ms);
        {
          // The wait runs out before the watchdog's deadline ...
          const DeadlineWaitMark waiting(Clock::now() + 100ms);
          std::this_thread::sleep_for(150ms);
        }
        // ... and its report (asking the other ranks where they are) outlasts it.
        std::this_thread::sleep_for(1500ms);
        std::exit(0);  // the report "threw": the watched scope unwinds and disarms
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(BlockingCallWatchdog, AnOverrunDeadlineWaitDoesNotHoldItForever) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const BlockingCallWatchdog watchdog("stuck call", 200ms);
        const DeadlineWaitMark waiting(Clock::now() + 100ms);
        std::this_thread::sleep_for(30s);  // past the wait's deadline and its grace
        std::exit(0);
      },
      ::testing::ExitedWithCode(kBlockedCallExitCode), "stuck call did not return within 200 ms");
}

TEST(BlockingCallWatchdog, TheReportNamesTheTrainingStep) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        accelerate::detail::note_training_step(41);
        const BlockingCallWatchdog watchdog("MPI_Finalize", 200ms, "[rank 0/2 on node7]");
        std::this_thread::sleep_for(20s);
        std::exit(0);
      },
      ::testing::ExitedWithCode(kBlockedCallExitCode),
      "\\[rank 0/2 on node7\\] MPI_Finalize did not return within 200 ms at training step 41");
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
