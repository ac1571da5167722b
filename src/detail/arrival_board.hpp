// ArrivalBoard: which ranks have reached which collective, asked for only
// after a timeout, to name the ranks that never arrived.
//
// Each rank counts the collectives it enters on a communicator (a plain
// increment: nothing on the hot path). A rank whose wait times out sends a
// query to every other rank on a private duplicate of the communicator and
// collects their counts for a short while. Ranks that are themselves
// waiting answer from their wait loop (serve_queries, called once a wait has
// lasted a second); a rank that never answers is outside any collective:
// computing, stuck, or dead, which is what the report needs to say.
//
// A board can be attached to the communicator it watches (an MPI attribute),
// so that code holding only the MPI_Comm finds it: State attaches boards to
// its communicators, and DeadlineComm names missing ranks through them.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "detail/unique_comm.hpp"

namespace accelerate::detail {

class ArrivalBoard {
 public:
  /// Collective over `comm` (duplicates it for the queries).
  explicit ArrivalBoard(MPI_Comm comm);
  /// Detaches the board if attached; the watched communicator must not
  /// have been freed yet.
  ~ArrivalBoard();
  ArrivalBoard(const ArrivalBoard&) = delete;
  ArrivalBoard& operator=(const ArrivalBoard&) = delete;

  /// A board for `comm` that attached(comm) finds until the board is
  /// destroyed. Collective over `comm`.
  static std::unique_ptr<ArrivalBoard> attach(MPI_Comm comm);
  /// The board attached to `comm`, or nullptr. Local, cheap.
  [[nodiscard]] static ArrivalBoard* attached(MPI_Comm comm) noexcept;

  /// Marks entry into the next collective; returns its sequence number (1, 2, …).
  int64_t arrive() noexcept { return ++sequence_; }

  /// Answers pending queries with this rank's count. Cheap (one MPI_Iprobe
  /// when nothing is pending); called from wait loops.
  void serve_queries() const;

  /// Ranks whose count is below `sequence`, e.g. "1 (at collective 41 of 42),
  /// 3 (no answer: not inside any collective)". Empty when all arrived.
  [[nodiscard]] std::string missing_ranks(int64_t sequence, std::chrono::milliseconds deadline) const;

 private:
  UniqueComm comm_;                      // private duplicate for queries and answers
  MPI_Comm attached_to_ = MPI_COMM_NULL;  // the watched communicator carrying this board
  int rank_ = 0;
  int size_ = 1;
  int64_t sequence_ = 0;
};

}  // namespace accelerate::detail
