// NcclComm: RAII owner of one ncclComm_t, and the NCCL capabilities the
// backend relies on. Compiled only when the NCCL feature is on.
//
// Lifetime (c10d's NCCLComm, Horovod's commDestroyOrAbort):
//   - move-only; a moved-from or aborted NcclComm owns nothing;
//   - the destructor is noexcept: if NCCL reports an asynchronous error it
//     aborts the communicator (ncclCommAbort), otherwise it flushes it
//     (ncclCommFinalize, which waits for the operations already enqueued)
//     and frees it (ncclCommDestroy);
//   - teardown order (NCCL docs example): the communicator first, then the
//     CUDA streams, events and buffers it used, then the MPI communicators.
//     The owners of an NcclComm declare it after those resources so that it
//     is destroyed before them.
#pragma once

#include <cuda_runtime_api.h>
#if defined(CUDART_VERSION) && CUDART_VERSION >= 11000
#include <cuda_bf16.h>  // older nccl.h declares ncclBfloat16 only when these types exist
#endif
#include <nccl.h>

#include <string>
#include <utility>

#include "detail/nccl_check.hpp"

// ncclGetLastError (used by every NCCL error message) and ncclRemoteError
// need NCCL 2.13; ncclAvg and ncclBfloat16 came with 2.10.
static_assert(NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0),
              "Accelerate-HPC needs NCCL 2.13 or newer; install a newer NCCL or configure with "
              "-DACCELERATE_WITH_NCCL=OFF.");

/// ncclCommFinalize (flush before destroy) exists since NCCL 2.14.
#define ACCELERATE_NCCL_HAS_COMM_FINALIZE (NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0))
/// Older nccl.h declares ncclBfloat16 only when cuda_bf16.h came first
/// (included above; include this header before <nccl.h> for that reason).
#if defined(__CUDA_BF16_TYPES_EXIST__)
#define ACCELERATE_NCCL_HAS_BF16 1
#else
#define ACCELERATE_NCCL_HAS_BF16 0
#endif

namespace accelerate::detail {

class NcclComm {
 public:
  NcclComm() noexcept = default;
  /// Takes ownership of `comm` (may be nullptr).
  explicit NcclComm(ncclComm_t comm) noexcept : comm_(comm) {}

  /// ncclCommInitRank on the current CUDA device; collective over the
  /// `size` ranks that received `id`. Blocks until all of them joined.
  static NcclComm init_rank(int size, const ncclUniqueId& id, int rank) {
    ncclComm_t comm = nullptr;
    ACCELERATE_NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank), nullptr);
    return NcclComm(comm);
  }

  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  NcclComm(NcclComm&& other) noexcept
      : comm_(std::exchange(other.comm_, nullptr)), abort_reason_(std::move(other.abort_reason_)) {}
  NcclComm& operator=(NcclComm&& other) noexcept {
    if (this != &other) {
      release();
      comm_ = std::exchange(other.comm_, nullptr);
      abort_reason_ = std::move(other.abort_reason_);
    }
    return *this;
  }
  ~NcclComm() { release(); }

  /// The handle for NCCL calls; nullptr when empty or aborted.
  [[nodiscard]] ncclComm_t get() const noexcept { return comm_; }
  [[nodiscard]] bool aborted() const noexcept { return !abort_reason_.empty(); }
  /// Why abort() was called ("" if it was not).
  [[nodiscard]] const std::string& abort_reason() const noexcept { return abort_reason_; }

  /// NCCL's asynchronous error state: ncclSuccess, ncclInProgress, or the
  /// error that broke the communicator (a peer failed, a network error…).
  [[nodiscard]] ncclResult_t async_error() const noexcept { return state_of(comm_); }

  /// Stops the operations still running on the GPU and frees the
  /// communicator (ncclCommAbort). Later calls through this object fail
  /// with `reason`. Idempotent.
  void abort(std::string reason) noexcept {
    if (abort_reason_.empty()) abort_reason_ = reason.empty() ? std::string("aborted") : std::move(reason);
    if (comm_ != nullptr) ncclCommAbort(std::exchange(comm_, nullptr));
  }

 private:
  static ncclResult_t state_of(ncclComm_t comm) noexcept {
    if (comm == nullptr) return ncclSuccess;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t result = ncclCommGetAsyncError(comm, &state);
    return result != ncclSuccess ? result : state;
  }

  void release() noexcept {
    if (comm_ == nullptr) return;
    ncclComm_t comm = std::exchange(comm_, nullptr);
    const ncclResult_t state = state_of(comm);
    if (state != ncclSuccess && state != ncclInProgress) {
      ncclCommAbort(comm);  // broken: finalize could wait forever for a dead peer
      return;
    }
#if ACCELERATE_NCCL_HAS_COMM_FINALIZE
    // Blocks until the operations already enqueued have completed.
    if (ncclCommFinalize(comm) != ncclSuccess) {
      ncclCommAbort(comm);
      return;
    }
#endif
    ncclCommDestroy(comm);  // on failure the handle may be half-freed: leave it alone
  }

  ncclComm_t comm_ = nullptr;
  std::string abort_reason_;
};

}  // namespace accelerate::detail
