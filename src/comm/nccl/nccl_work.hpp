// What an NCCL collective needs once it is posted: CUDA RAII handles, the
// resources a backend shares with its Works, the argument checks run before
// enqueuing, and NcclWork. Compiled only when the NCCL feature is on.
//
// Streams (c10d's [Sync Streams]):
//
//   current stream at post ──record(ready)──┐                 ┌──wait(done)── current stream at wait()
//   backend stream                          └─wait(ready)─ NCCL op ─record(done)─┘
//
// Every collective runs on the backend's own stream, ordered after the work
// already queued on the caller's current stream (caller_stream()). Work::
// wait() makes the stream that is current when wait() is called wait for the
// collective (not necessarily the one current when it was posted), then
// blocks the host until the collective has finished, polling its completion
// event and NCCL's asynchronous error state against the deadline (there is
// no watchdog thread). On timeout it aborts the communicator (ncclCommAbort)
// so that the GPU is released, then throws TimeoutError or ends the job
// (TimeoutPolicy::abort_job), like MpiWork.
#pragma once

#include "comm/nccl/nccl_comm.hpp"  // first: it must precede <nccl.h>

#include <ATen/core/Tensor.h>
#include <cuda_runtime_api.h>

#include "accelerate/config.hpp"
#if ACCELERATE_TORCH_CUDA_STREAMS
#include <c10/cuda/CUDAStream.h>
#endif

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "accelerate/comm/types.hpp"
#include "accelerate/comm/work.hpp"
#include "comm/timeout_policy.hpp"
#include "detail/cuda_check.hpp"

namespace accelerate::detail {

/// The caller's current stream on CUDA device `device`: the stream the GPU
/// work producing a collective's input was queued on, and (at wait()) the
/// stream that must wait for its output. The one place that decides it.
///
/// With a CUDA LibTorch (ACCELERATE_TORCH_CUDA_STREAMS, decided at configure
/// time) it is LibTorch's current stream, c10::cuda::getCurrentCUDAStream:
/// the default stream unless the program selected another one (a
/// CUDAStreamGuard, a pool stream). Against a CPU-only LibTorch, which has no
/// such API, the default stream stands in: cudaStreamLegacy, or
/// cudaStreamPerThread when compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM.
/// The legacy stream also orders work on blocking streams, but not on
/// non-blocking ones, which the caller must synchronise before a collective.
inline cudaStream_t caller_stream([[maybe_unused]] int device) {
#if ACCELERATE_TORCH_CUDA_STREAMS
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
#elif defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
  return cudaStreamPerThread;
#else
  return cudaStreamLegacy;
#endif
}

/// Makes `device` current for the scope and restores the previous device.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device) {
    ACCELERATE_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) {
      ACCELERATE_CUDA_CHECK(cudaSetDevice(device));
      restore_ = true;
    }
  }
  ~CudaDeviceGuard() {
    if (restore_) cudaSetDevice(previous_);
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool restore_ = false;
};

/// A non-blocking stream on the current device: it does not synchronise
/// implicitly with the legacy default stream, so only the events order it.
class CudaStream {
 public:
  CudaStream() { ACCELERATE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// An event without timing (the cheapest kind) on the current device.
class CudaEvent {
 public:
  CudaEvent() { ACCELERATE_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~CudaEvent() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&&) = delete;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  [[nodiscard]] cudaEvent_t get() const noexcept { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

/// `bytes` of zeroed device memory on the current device.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    ACCELERATE_CUDA_CHECK(cudaMalloc(&data_, bytes));
    ACCELERATE_CUDA_CHECK(cudaMemset(data_, 0, bytes));
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  [[nodiscard]] void* get() const noexcept { return data_; }

 private:
  void* data_ = nullptr;
};

/// What a backend shares with the Works it posted, so that a Work stays
/// valid if it outlives its backend. Members are destroyed in reverse order:
/// the communicator first, then the buffer and the stream it used.
struct NcclResources {
  NcclResources(int device, std::string group, int rank, int size)
      : device(device), group(std::move(group)), rank(rank), size(size) {}

  int device;
  std::string group;
  int rank;
  int size;
  CudaStream stream;                           // the backend stream
  DeviceBuffer barrier_buffer{sizeof(float)};  // the barrier's one-element all_reduce
  NcclComm comm;                               // declared last: destroyed first
};

// --- argument checks, run before anything is enqueued ---------------------

/// ConfigError unless `tensor` is a defined, strided, contiguous CUDA tensor
/// on cuda:`device`. Non-contiguous tensors are rejected rather than staged:
/// the copy into and out of a contiguous temporary would have to run on the
/// backend stream through LibTorch's CUDA kernels, which a CPU-only LibTorch
/// does not have.
void check_nccl_tensor(const at::Tensor& tensor, int device, const char* operation, const char* role);

/// The NCCL reduction applied to `type` for `op`. Bool travels as uint8, on
/// which a sum is not a logical OR (it is not even bounded by 1), so bool
/// maps Sum and Max to ncclMax (OR) and Min and Product to ncclMin (AND).
/// Avg needs a floating-point type (ConfigError otherwise).
ncclRedOp_t nccl_reduction(ReduceOp op, c10::ScalarType type, const char* operation);

// --- the Work -------------------------------------------------------------

/// Holding the tensors until the host has seen the completion event stands
/// in for recordStream(): LibTorch's caching allocator hands a block out
/// again as soon as its last reference dies, which must not happen while
/// the backend stream still uses it. wait() releases them after ordering
/// the caller's stream, so the block's next user, queued there, runs after.
class NcclWork final : public Work {
 public:
  /// `done` was recorded on the backend stream after the operation;
  /// `keep_alive` holds the tensors it touches until it has completed.
  NcclWork(std::string description, std::shared_ptr<NcclResources> resources, CudaEvent done,
           std::vector<at::Tensor> keep_alive, TimeoutPolicy policy);
  ~NcclWork() override;
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  /// Non-blocking: queries the completion event (and NCCL's error state).
  bool is_completed() override;
  /// Orders the caller's stream current now (caller_stream()) after the
  /// operation, then blocks the host until it finished, within the
  /// deadline; rethrows its error.
  void wait() override;
  [[nodiscard]] std::exception_ptr exception() const override { return error_; }
  [[nodiscard]] const std::string& description() const override { return description_; }

 private:
  void poll() noexcept;
  void finish() noexcept;
  void fail(std::exception_ptr error) noexcept;
  [[noreturn]] void report_timeout(std::chrono::steady_clock::duration waited);

  std::string description_;
  std::shared_ptr<NcclResources> resources_;
  CudaEvent done_event_;
  std::vector<at::Tensor> keep_alive_;
  TimeoutPolicy policy_;
  std::chrono::steady_clock::time_point posted_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace accelerate::detail
