#include "detail/arrival_board.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "detail/mpi_check.hpp"
#include "detail/mpi_runtime.hpp"

namespace accelerate::detail {
namespace {

constexpr int kQueryTag = 1;
constexpr int kAnswerTag = 2;

// The attribute key under which a communicator carries its board; created
// on first use (MPI must be running) and kept for the life of the process.
int board_keyval() {
  static const int keyval = [] {
    int key = MPI_KEYVAL_INVALID;
    ACCELERATE_MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, nullptr));
    return key;
  }();
  return keyval;
}

// Buffers handed to MPI by destroyed boards: kept reachable for the life of
// the process (a leak checker sees them as held, which they are, by MPI).
std::mutex kept_mutex;
std::vector<std::unique_ptr<std::array<int64_t, 2>>>& kept_for_mpi() {
  static auto* const kept = new std::vector<std::unique_ptr<std::array<int64_t, 2>>>;
  return *kept;
}
std::atomic<std::size_t> leaked_buffers{0};

}  // namespace

ArrivalBoard::ArrivalBoard(MPI_Comm comm) {
  ACCELERATE_MPI_CHECK(MPI_Comm_dup(comm, comm_.out()));
  ACCELERATE_MPI_CHECK(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN));
  ACCELERATE_MPI_CHECK(MPI_Comm_rank(comm_.get(), &rank_));
  ACCELERATE_MPI_CHECK(MPI_Comm_size(comm_.get(), &size_));
}

ArrivalBoard::~ArrivalBoard() {
  if (!mpi_is_running()) {
    in_flight_.clear();  // MPI is gone, and with it any use of these buffers
    return;
  }
  // Unchecked here and below: a destructor must not throw, and a failed
  // detach or free only leaks what the process is about to drop anyway.
  if (attached_to_ != MPI_COMM_NULL) MPI_Comm_delete_attr(attached_to_, board_keyval());
  reap();
  // MPI may still read these buffers: it frees the requests when the sends
  // complete, and the buffers stay allocated for good.
  const std::lock_guard lock(kept_mutex);
  for (Message& message : in_flight_) {
    MPI_Request_free(&message.request);
    kept_for_mpi().push_back(std::move(message.data));
    leaked_buffers.fetch_add(1, std::memory_order_relaxed);
  }
}

std::size_t ArrivalBoard::in_flight_leaked() noexcept { return leaked_buffers.load(std::memory_order_relaxed); }

void ArrivalBoard::keep_in_flight(Message message) const {
  if (message.request != MPI_REQUEST_NULL) in_flight_.push_back(std::move(message));
}

void ArrivalBoard::reap() const {
  // Unchecked (the destructor reaps too): a failed test keeps the message in flight.
  std::erase_if(in_flight_, [](Message& message) {
    int done = 0;
    return MPI_Test(&message.request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done != 0;
  });
}

std::unique_ptr<ArrivalBoard> ArrivalBoard::attach(MPI_Comm comm) {
  auto board = std::make_unique<ArrivalBoard>(comm);
  ACCELERATE_MPI_CHECK(MPI_Comm_set_attr(comm, board_keyval(), board.get()));
  board->attached_to_ = comm;
  return board;
}

ArrivalBoard* ArrivalBoard::attached(MPI_Comm comm) noexcept {
  if (comm == MPI_COMM_NULL) return nullptr;
  void* value = nullptr;
  int found = 0;
  try {
    if (MPI_Comm_get_attr(comm, board_keyval(), &value, &found) != MPI_SUCCESS) return nullptr;
  } catch (...) {
    return nullptr;
  }
  return found != 0 ? static_cast<ArrivalBoard*>(value) : nullptr;
}

void ArrivalBoard::serve_queries() const {
  // Unchecked on purpose: this runs inside other waits' polling loops, and
  // an exception there would leave their collective pending on a
  // communicator nobody marked abandoned. A query left unanswered only
  // makes the asker report this rank as "no answer".
  reap();
  for (;;) {
    int pending = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, comm_.get(), &pending, &status) != MPI_SUCCESS || pending == 0) return;
    int64_t query = 0;
    MPI_Recv(&query, 1, MPI_INT64_T, status.MPI_SOURCE, kQueryTag, comm_.get(), MPI_STATUS_IGNORE);
    // The asker may already have given up waiting: the answer stays in
    // flight, its buffer alive, until it is delivered.
    Message answer{std::make_unique<std::array<int64_t, 2>>(std::array<int64_t, 2>{query, sequence_})};
    MPI_Isend(answer.data->data(), 2, MPI_INT64_T, status.MPI_SOURCE, kAnswerTag, comm_.get(), &answer.request);
    keep_in_flight(std::move(answer));
  }
}

std::string ArrivalBoard::missing_ranks(int64_t sequence, std::chrono::milliseconds deadline) const {
  const auto n = static_cast<std::size_t>(size_);
  std::vector<bool> answered(n, false);
  std::vector<int64_t> counts(n, -1);
  answered[static_cast<std::size_t>(rank_)] = true;
  counts[static_cast<std::size_t>(rank_)] = sequence_;
  const int64_t query = ++queries_;
  // Unchecked on purpose: this builds a TimeoutError's message, which a
  // failed query must not replace; a rank that cannot be asked is listed as
  // not answering.
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    Message message{std::make_unique<std::array<int64_t, 2>>(std::array<int64_t, 2>{query, 0})};
    MPI_Isend(message.data->data(), 1, MPI_INT64_T, r, kQueryTag, comm_.get(), &message.request);
    keep_in_flight(std::move(message));
  }
  const auto until = std::chrono::steady_clock::now() + deadline;
  for (bool all = size_ == 1; !all && std::chrono::steady_clock::now() < until;) {
    serve_queries();  // the others are asking us at the same time
    // Answers are received as they come, never pre-posted: nothing is left
    // to cancel, and a stale answer (an earlier query's) is dropped.
    for (;;) {
      int pending = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kAnswerTag, comm_.get(), &pending, &status) != MPI_SUCCESS || pending == 0) break;
      std::array<int64_t, 2> answer{};
      MPI_Recv(answer.data(), 2, MPI_INT64_T, status.MPI_SOURCE, kAnswerTag, comm_.get(), MPI_STATUS_IGNORE);
      if (answer[0] != query) continue;
      const auto i = static_cast<std::size_t>(status.MPI_SOURCE);
      answered[i] = true;
      counts[i] = answer[1];
    }
    all = std::all_of(answered.begin(), answered.end(), [](bool a) { return a; });
    if (!all) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::string text;
  for (std::size_t i = 0; i < n; ++i) {
    std::string entry;
    if (!answered[i]) {
      entry = std::to_string(i) + " (no answer: not inside any collective of this group)";
    } else if (counts[i] < sequence) {
      entry =
          std::to_string(i) + " (at collective " + std::to_string(counts[i]) + " of " + std::to_string(sequence) + ")";
    }
    if (entry.empty()) continue;
    if (!text.empty()) text += ", ";
    text += entry;
  }
  return text;
}

}  // namespace accelerate::detail
