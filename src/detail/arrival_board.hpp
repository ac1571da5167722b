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
// Each query carries an id and each answer repeats it: an answer that
// arrives after its asker gave up is recognised as stale and dropped, never
// taken for the answer to a later query. Every query and answer buffer lives
// as long as its send: the board keeps unfinished sends in flight and reaps
// them as they complete; what is still in flight when the board is destroyed
// is handed to MPI with MPI_Request_free and its buffer deliberately kept
// for the life of the process (in_flight_leaked()).
//
// A board can be attached to the communicator it watches (an MPI attribute),
// so that code holding only the MPI_Comm finds it: State attaches boards to
// its communicators, and DeadlineComm names missing ranks through them.
#pragma once

#include <mpi.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

  /// Sends of this board not yet complete (for tests).
  [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_.size(); }
  /// Buffers of all destroyed boards kept for MPI because their request
  /// could still complete (for tests; bounded by the queries a job makes).
  [[nodiscard]] static std::size_t in_flight_leaked() noexcept;

 private:
  // One send's buffer ({query id, count}) and request; the buffer never moves (heap).
  struct Message {
    std::unique_ptr<std::array<int64_t, 2>> data;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  /// Keeps `message` until its request completes.
  void keep_in_flight(Message message) const;
  /// Drops the messages whose requests have completed.
  void reap() const;

  UniqueComm comm_;                       // private duplicate for queries and answers
  MPI_Comm attached_to_ = MPI_COMM_NULL;  // the watched communicator carrying this board
  int rank_ = 0;
  int size_ = 1;
  int64_t sequence_ = 0;
  mutable int64_t queries_ = 0;  // ids of this rank's queries
  mutable std::vector<Message> in_flight_;
};

}  // namespace accelerate::detail
