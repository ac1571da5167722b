// Shared main for the GoogleTest suites, at any number of ranks.
//
// - Initialises MPI itself, so every accelerate::State in a test adopts it
//   and tests can create and destroy States freely: at MPI_THREAD_FUNNELED,
//   or MULTIPLE where ACCELERATE_MPI_THREAD_LEVEL=multiple (asynchronous saves).
// - Runs the tests on every rank. Rank 0 prints the usual report; other
//   ranks print only their failures, prefixed with their rank.
// - All ranks agree on the outcome (MPI_Allreduce MAX) and exit with the
//   same code: 0 pass, 1 fail (or no test selected), 77 when every test was
//   skipped.
// - An exception escaping a test body on one rank aborts the job instead of
//   leaving the others blocked in the next collective.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string_view>

namespace {

class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
  }
  void OnTestEnd(const testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
    }
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  const char* level = std::getenv("ACCELERATE_MPI_THREAD_LEVEL");
  const bool multiple = level != nullptr && std::string_view(level) == "multiple";
  int provided = 0;
  MPI_Init_thread(&argc, &argv, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  testing::InitGoogleTest(&argc, argv);
  // An exception must not be swallowed as one rank's test failure: that rank
  // would move on while the others wait in a collective. Let it escape to the
  // handler below, which ends the whole job.
  GTEST_FLAG_SET(catch_exceptions, false);

  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }

  int outcome = 0;
  try {
    outcome = RUN_ALL_TESTS() == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "[rank %d] exception outside a test: %s\n", rank, error.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const auto* unit = testing::UnitTest::GetInstance();
  if (outcome == 0 && unit->successful_test_count() == 0 && unit->skipped_test_count() > 0) outcome = 77;
  // A registered test whose --gtest_filter selects nothing would pass while
  // testing nothing (the test bundle, cmake/AccelerateAddTest.cmake).
  if (unit->test_to_run_count() == 0) {
    std::fprintf(stderr, "[rank %d] no test matched --gtest_filter=%s\n", rank,
                 GTEST_FLAG_GET(filter).c_str());
    outcome = 1;
  }

  // 1 (a failure anywhere) beats 77 (skipped) beats 0.
  int local = outcome == 1 ? 2 : (outcome == 77 ? 1 : 0);
  int global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  if (global == 2) {
    if (rank == 0 && outcome == 0) std::fprintf(stderr, "[rank 0] another rank failed; see its output above\n");
    return 1;
  }
  if (global == 1) {
    if (rank == 0) std::printf("ACCELERATE_TEST_SKIPPED\n");
    return 77;
  }
  return 0;
}
