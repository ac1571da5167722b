// MpiWork: one posted non-blocking MPI collective.
//
// Holds the request, keeps the tensors it touches alive, and runs an
// epilogue once MPI completes (copy back into a non-contiguous destination,
// the division of an average). Completion is polled on the calling thread
// (the library runs MPI FUNNELED) against the operation's deadline; on
// timeout the ArrivalBoard names the ranks that never arrived.
#pragma once

#include <mpi.h>

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <vector>

#include "accelerate/comm/work.hpp"
#include "comm/timeout_policy.hpp"

namespace accelerate::detail {

class ArrivalBoard;

/// What an operation is, kept as data and rendered only when a message or
/// description() needs it: building strings on every call would cost more
/// than a small all-reduce itself.
struct OperationLabel {
  const char* name = "";
  std::string_view qualifier;  ///< "sum", "max", … (static storage) or empty
  int root = -1;               ///< shown as "root r" when >= 0
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::SmallVector<int64_t, 6> sizes;

  OperationLabel() = default;
  OperationLabel(const char* op, std::string_view qualifier_text, int root_rank, const at::Tensor* tensor);
  [[nodiscard]] std::string render() const;
};

/// Reports a collective that missed its deadline, on stderr or in the
/// exception: which one, on which group, and the ranks that never arrived
/// (`missing`; empty: none found). Abandons `comm`, whose operations may
/// still complete, then MPI_Aborts the job or throws TimeoutError (policy).
[[noreturn]] void raise_collective_timeout(const std::string& description, const std::string& group, int64_t sequence,
                                           std::string missing, std::chrono::steady_clock::duration waited,
                                           const TimeoutPolicy& policy, MPI_Comm comm);

/// Keeps the memory of `tensors` until the process exits: a request that
/// missed its deadline may still write into it when a late rank arrives.
void keep_until_exit(const std::vector<at::Tensor>& tensors);

class MpiWork final : public Work {
 public:
  MpiWork(OperationLabel label, MPI_Request request, std::vector<at::Tensor> keep_alive, std::function<void()> epilogue,
          const ArrivalBoard* board, int64_t sequence, std::string group, TimeoutPolicy policy, MPI_Comm comm);
  ~MpiWork() override;

  bool is_completed() override;
  void wait() override;
  [[nodiscard]] std::exception_ptr exception() const override { return error_; }
  [[nodiscard]] const std::string& description() const override;

 private:
  void finish() noexcept;
  [[noreturn]] void report_timeout(std::chrono::steady_clock::duration waited);

  OperationLabel label_;
  mutable std::string description_;  // rendered on first use
  MPI_Request request_;
  std::vector<at::Tensor> keep_alive_;
  std::function<void()> epilogue_;
  const ArrivalBoard* board_;
  int64_t sequence_;
  std::string group_;
  TimeoutPolicy policy_;
  MPI_Comm comm_;  // abandoned on timeout (detail/unique_comm.hpp)
  std::chrono::steady_clock::time_point posted_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace accelerate::detail
