#include "comm/mpi/mpi_work.hpp"

#include <cstdio>
#include <mutex>
#include <sstream>

#include "accelerate/error.hpp"
#include "detail/arrival_board.hpp"
#include "detail/job_step.hpp"
#include "detail/mpi_check.hpp"
#include "detail/mpi_runtime.hpp"
#include "detail/mpi_wait.hpp"
#include "detail/unique_comm.hpp"

namespace accelerate {

namespace detail {

OperationLabel::OperationLabel(const char* op, std::string_view qualifier_text, int root_rank, const at::Tensor* tensor)
    : name(op), qualifier(qualifier_text), root(root_rank) {
  if (tensor != nullptr && tensor->defined()) {
    dtype = tensor->scalar_type();
    sizes.assign(tensor->sizes().begin(), tensor->sizes().end());
  }
}

std::string OperationLabel::render() const {
  std::ostringstream out;
  out << name;
  if (!qualifier.empty()) {
    out << '(' << qualifier << ')';
  } else if (root >= 0) {
    out << "(root " << root << ')';
  }
  if (dtype != c10::ScalarType::Undefined) out << ' ' << c10::toString(dtype) << c10::IntArrayRef(sizes);
  return out.str();
}

const std::string& MpiWork::description() const {
  if (description_.empty()) description_ = label_.render();
  return description_;
}

MpiWork::MpiWork(OperationLabel label, MPI_Request request, std::vector<at::Tensor> keep_alive,
                 std::function<void()> epilogue, const ArrivalBoard* board, int64_t sequence, std::string group,
                 TimeoutPolicy policy, MPI_Comm comm)
    : label_(std::move(label)),
      request_(request),
      keep_alive_(std::move(keep_alive)),
      epilogue_(std::move(epilogue)),
      board_(board),
      sequence_(sequence),
      group_(std::move(group)),
      policy_(policy),
      comm_(comm),
      posted_(std::chrono::steady_clock::now()) {}

MpiWork::~MpiWork() {
  if (!done_) complete_dropped_work(*this);
}

void MpiWork::finish() noexcept {
  done_ = true;
  try {
    if (epilogue_) epilogue_();
  } catch (...) {
    error_ = std::current_exception();
  }
  keep_alive_.clear();
  epilogue_ = nullptr;
}

bool MpiWork::is_completed() {
  if (done_) return true;
  int flag = 0;
  try {
    ACCELERATE_MPI_CHECK(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE));
  } catch (...) {
    error_ = std::current_exception();
    done_ = true;
    return true;
  }
  if (flag != 0) finish();
  return done_;
}

void MpiWork::wait() {
  if (!done_) {
    // A long wait may be another rank's timeout: answer its arrival query.
    const auto answer_queries = [this] {
      if (board_ != nullptr) board_->serve_queries();
    };
    if (!poll_until(
            posted_ + policy_.timeout, [this] { return is_completed(); }, answer_queries)) {
      report_timeout(std::chrono::steady_clock::now() - posted_);
    }
  }
  if (error_) std::rethrow_exception(error_);
}

void raise_collective_timeout(const std::string& description, const std::string& group, int64_t sequence,
                              std::string missing, std::chrono::steady_clock::duration waited,
                              const TimeoutPolicy& policy, MPI_Comm comm) {
  const auto seconds = std::chrono::duration<double>(waited).count();
  if (missing.empty()) missing = "none found (all ranks entered it; one may have crashed inside)";
  char elapsed[32];
  std::snprintf(elapsed, sizeof(elapsed), "%.1f", seconds);
  const std::string message =
      where() + " collective timeout: " + description + " on group '" + group + "' (collective #" +
      std::to_string(sequence) + ") did not complete after " + elapsed + " s" + at_training_step() +
      ". Ranks that never arrived: " + missing +
      ". They crashed, hang, or took a different code path; their own output names the cause. Raise the limit with "
      "InitProcessGroupKwargs::timeout or ACCELERATE_TIMEOUT if the work between collectives is legitimately slow.";
  abandon(comm);
  if (policy.abort_job) {
    std::fprintf(stderr, "%s Aborting the job.\n", message.c_str());
    std::fflush(stderr);
    abort_running_mpi(3);
  }
  throw TimeoutError(message);
}

void keep_until_exit(const std::vector<at::Tensor>& tensors) {
  // Leaked deliberately: MPI may write into this memory at any later time
  // (the job is being torn down).
  static auto* abandoned = new std::vector<at::Tensor>();
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  abandoned->insert(abandoned->end(), tensors.begin(), tensors.end());
}

void MpiWork::report_timeout(std::chrono::steady_clock::duration waited) {
  const std::string missing = board_ != nullptr ? board_->missing_ranks(sequence_, std::chrono::seconds(2)) : "";
  done_ = true;
  keep_until_exit(keep_alive_);
  try {
    raise_collective_timeout(description(), group_, sequence_, missing, waited, policy_, comm_);
  } catch (...) {
    error_ = std::current_exception();
    throw;
  }
}

}  // namespace detail
}  // namespace accelerate
