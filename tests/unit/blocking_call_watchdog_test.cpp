// BlockingCallWatchdog: a call blocked past its limit ends the process with
// exit code 3 and a report naming the call; a call that returns in time
// disarms it. Each case runs in a death-test child process.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "detail/blocking_call_watchdog.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::detail::BlockingCallWatchdog;
using accelerate::detail::kBlockedCallExitCode;
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

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
