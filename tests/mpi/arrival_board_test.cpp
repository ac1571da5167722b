// ArrivalBoard at 2 and 4 ranks: answers to queries whose asker gave up
// arrive late and must never be taken for the answers to a later query;
// every send stays alive until it completes.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>

#include "detail/arrival_board.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::detail::ArrivalBoard;
using namespace std::chrono_literals;

int rank_of_world() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}
int size_of_world() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// Serves queries until every rank has reached this point.
void serve_until_all_arrive(const ArrivalBoard& board) {
  MPI_Request barrier = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &barrier);
  for (int done = 0; done == 0;) {
    board.serve_queries();
    MPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
    std::this_thread::sleep_for(1ms);
  }
}

TEST(ArrivalBoard, LateAnswersToAbandonedQueriesAreNeverTakenForNewOnes) {
  const int rank = rank_of_world();
  const int size = size_of_world();
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  const ArrivalBoard board(MPI_COMM_WORLD);
  ArrivalBoard& counting = const_cast<ArrivalBoard&>(board);

  // 1. Rank 0 asks three times while the others are busy: no answers.
  if (rank == 0) {
    for (int k = 0; k < 3; ++k) {
      const std::string missing = board.missing_ranks(1, 30ms);
      EXPECT_NE(missing.find("1 (no answer"), std::string::npos) << missing;
    }
  } else {
    std::this_thread::sleep_for(400ms);
    // 2. The others, at collective 2, answer the three stale queries late.
    counting.arrive();
    counting.arrive();
  }
  serve_until_all_arrive(board);

  // 3. At collective 5 they answer a fresh query: the stale answers ("2")
  // waiting at rank 0 must be dropped, not reported.
  if (rank != 0) {
    for (int k = 0; k < 3; ++k) counting.arrive();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    const std::string missing = board.missing_ranks(6, 10s);
    for (int r = 1; r < size; ++r) {
      EXPECT_NE(missing.find(std::to_string(r) + " (at collective 5 of 6)"), std::string::npos) << missing;
    }
    EXPECT_EQ(missing.find("at collective 2"), std::string::npos) << missing;
  }
  serve_until_all_arrive(board);

  // Every send completes once all have been served: nothing stays in flight.
  for (int k = 0; k < 100 && board.in_flight() > 0; ++k) {
    board.serve_queries();
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(board.in_flight(), 0U);
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
