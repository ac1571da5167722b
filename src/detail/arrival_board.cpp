#include "detail/arrival_board.hpp"

#include <thread>
#include <vector>

#include "detail/mpi_check.hpp"

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

}  // namespace

ArrivalBoard::ArrivalBoard(MPI_Comm comm) {
  ACCELERATE_MPI_CHECK(MPI_Comm_dup(comm, comm_.out()));
  ACCELERATE_MPI_CHECK(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN));
  ACCELERATE_MPI_CHECK(MPI_Comm_rank(comm_.get(), &rank_));
  ACCELERATE_MPI_CHECK(MPI_Comm_size(comm_.get(), &size_));
}

ArrivalBoard::~ArrivalBoard() {
  if (attached_to_ != MPI_COMM_NULL && mpi_is_running()) MPI_Comm_delete_attr(attached_to_, board_keyval());
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
  for (;;) {
    int pending = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, comm_.get(), &pending, &status) != MPI_SUCCESS || pending == 0) return;
    int64_t ignored = 0;
    MPI_Recv(&ignored, 1, MPI_INT64_T, status.MPI_SOURCE, kQueryTag, comm_.get(), MPI_STATUS_IGNORE);
    // Fire and forget: the asker may already have given up waiting.
    MPI_Request request = MPI_REQUEST_NULL;
    static thread_local int64_t answer = 0;
    answer = sequence_;
    MPI_Isend(&answer, 1, MPI_INT64_T, status.MPI_SOURCE, kAnswerTag, comm_.get(), &request);
    MPI_Request_free(&request);
  }
}

std::string ArrivalBoard::missing_ranks(int64_t sequence, std::chrono::milliseconds deadline) const {
  const auto n = static_cast<std::size_t>(size_);
  std::vector<int64_t> counts(n, -1);
  std::vector<MPI_Request> answers(n, MPI_REQUEST_NULL);
  std::vector<MPI_Request> queries(n, MPI_REQUEST_NULL);
  std::vector<bool> answered(n, false);
  answered[static_cast<std::size_t>(rank_)] = true;
  counts[static_cast<std::size_t>(rank_)] = sequence_;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const auto i = static_cast<std::size_t>(r);
    MPI_Irecv(&counts[i], 1, MPI_INT64_T, r, kAnswerTag, comm_.get(), &answers[i]);
    MPI_Isend(&sequence_, 1, MPI_INT64_T, r, kQueryTag, comm_.get(), &queries[i]);
  }
  const auto until = std::chrono::steady_clock::now() + deadline;
  for (bool all = false; !all && std::chrono::steady_clock::now() < until;) {
    serve_queries();  // the others are asking us at the same time
    all = true;
    for (std::size_t i = 0; i < n; ++i) {
      if (answered[i]) continue;
      int done = 0;
      MPI_Test(&answers[i], &done, MPI_STATUS_IGNORE);
      answered[i] = done != 0;
      all = all && answered[i];
    }
    if (!all) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // Unanswered requests can never complete safely now: cancel what can be
  // cancelled and let MPI reclaim the rest.
  for (std::size_t i = 0; i < n; ++i) {
    if (answers[i] != MPI_REQUEST_NULL && !answered[i]) {
      MPI_Cancel(&answers[i]);
      MPI_Request_free(&answers[i]);
    }
    if (queries[i] != MPI_REQUEST_NULL) MPI_Request_free(&queries[i]);
  }
  std::string text;
  for (std::size_t i = 0; i < n; ++i) {
    std::string entry;
    if (!answered[i]) {
      entry = std::to_string(i) + " (no answer: not inside any collective of this group)";
    } else if (counts[i] < sequence) {
      entry = std::to_string(i) + " (at collective " + std::to_string(counts[i]) + " of " + std::to_string(sequence) + ")";
    }
    if (entry.empty()) continue;
    if (!text.empty()) text += ", ";
    text += entry;
  }
  return text;
}

}  // namespace accelerate::detail
