// NcclBackend: collectives on CUDA tensors over an NCCL communicator that is
// bootstrapped through MPI, each enqueued on a backend-owned stream behind an
// NcclWork (see nccl_work.hpp for the stream and timeout semantics).
//
// Only the CUDA runtime API is used, and LibTorch's CUDA API only to learn
// the caller's current stream where LibTorch has it (caller_stream()), so the
// backend builds against a CPU-only LibTorch. Consequences:
//   - against a CPU-only LibTorch the caller's stream is the default stream;
//   - tensors must be contiguous: nothing is staged on the GPU;
//   - dtype and reduction conversions are table look-ups (ncclAvg divides).
#include "comm/nccl/nccl_comm.hpp"  // first: it must precede <nccl.h>

#include "comm/nccl/nccl_backend.hpp"

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "accelerate/error.hpp"
#include "comm/mpi/mpi_types.hpp"
#include "comm/nccl/nccl_split_method.hpp"
#include "comm/nccl/nccl_work.hpp"
#include "comm/tensor_checks.hpp"
#include "detail/cuda_check.hpp"
#include "detail/job_step.hpp"
#include "detail/mpi_check.hpp"
#include "detail/mpi_runtime.hpp"
#include "detail/mpi_wait.hpp"
#include "detail/nccl_check.hpp"

namespace accelerate::detail {
namespace {

std::string seconds_text(std::chrono::steady_clock::duration duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", std::chrono::duration<double>(duration).count());
  return text;
}

std::string visible_devices_text() {
  const char* value = std::getenv("CUDA_VISIBLE_DEVICES");
  return value == nullptr ? std::string("unset") : "'" + std::string(value) + "'";
}

// What to do when a rank has no usable GPU.
std::string no_gpu_remedy() {
  return "Check that this node has an NVIDIA GPU and driver (nvidia-smi), that CUDA_VISIBLE_DEVICES (" +
         visible_devices_text() +
         ") lists it, and that the job requests GPUs (e.g. srun --gpus-per-task=1); or run on the CPU with "
         "ACCELERATE_USE_CPU=1, where tensors travel over MPI.";
}

std::size_t count_of(const at::Tensor& tensor) { return static_cast<std::size_t>(tensor.numel()); }
std::size_t bytes_of(const at::Tensor& tensor) { return count_of(tensor) * tensor.element_size(); }
char* bytes_at(const at::Tensor& tensor, std::size_t offset) { return static_cast<char*>(tensor.data_ptr()) + offset; }

// ncclGroupStart/ncclGroupEnd around point-to-point calls; the group is
// closed even when a call inside it throws.
class NcclGroup {
 public:
  explicit NcclGroup(ncclComm_t comm) : comm_(comm) { ACCELERATE_NCCL_CHECK(ncclGroupStart(), comm_); }
  void end() {
    open_ = false;
    ACCELERATE_NCCL_CHECK(ncclGroupEnd(), comm_);
  }
  ~NcclGroup() {
    if (open_) ncclGroupEnd();
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

 private:
  ncclComm_t comm_;
  bool open_ = true;
};

// A device-to-device copy on the backend stream (this rank's own block of
// the gather/scatter family: NCCL moves only the blocks of other ranks).
void copy_on_stream(void* destination, const void* source, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0 || destination == source) return;
  ACCELERATE_CUDA_CHECK(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice, stream));
}

// Tensors MPI or NCCL may still write into after a failure must never be
// freed; leak them deliberately (the job is being torn down).
void abandon(std::vector<at::Tensor>& tensors) noexcept {
  try {
    static auto* abandoned = new std::vector<at::Tensor>();
    abandoned->insert(abandoned->end(), tensors.begin(), tensors.end());
  } catch (...) {  // out of memory: keep them in the Work instead
    return;
  }
  tensors.clear();
}

std::string aborted_message(const std::string& description, const NcclResources& resources) {
  return description + " on group '" + resources.group +
         "': the NCCL communicator was aborted after an earlier failure (" + resources.comm.abort_reason() +
         "). The group can no longer carry CUDA tensors; end the job (or create a new process group).";
}

}  // namespace

// --- dtype and reduction tables ---------------------------------------------

ncclDataType_t nccl_datatype(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat: return ncclFloat32;
    case c10::kDouble: return ncclFloat64;
    case c10::kHalf: return ncclFloat16;
#if ACCELERATE_NCCL_HAS_BF16
    case c10::kBFloat16: return ncclBfloat16;
#endif
    case c10::kInt: return ncclInt32;
    case c10::kLong: return ncclInt64;
    case c10::kChar: return ncclInt8;
    case c10::kByte: return ncclUint8;
    case c10::kBool: return ncclUint8;  // one byte, 0 or 1; see nccl_reduction(op, type)
    default: break;
  }
  std::string hint;
  if (type == c10::kShort) hint = " NCCL has no 16-bit integer type: convert int16 to int32.";
  if (type == c10::kBFloat16) hint = " This NCCL was built without bfloat16 (it needs CUDA 11 headers).";
  if (c10::isComplexType(type)) hint = " For complex tensors, reduce at::view_as_real(tensor) instead.";
  throw ConfigError("NCCL backend: dtype " + std::string(c10::toString(type)) +
                    " is not supported by the collectives; convert the tensor to one of float32, float64, "
                    "float16, bfloat16, int8, int32, int64, uint8 or bool first." +
                    hint);
}

ncclRedOp_t nccl_reduction(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Product: return ncclProd;
  }
  throw ConfigError("NCCL backend: unknown ReduceOp value " + std::to_string(static_cast<int>(op)) + ".");
}

ncclRedOp_t nccl_reduction(ReduceOp op, c10::ScalarType type, const char* operation) {
  check_reduction_supported(op, type, operation);  // Avg: floating point only, as for MPI
  if (type == c10::kBool) {
    return (op == ReduceOp::Sum || op == ReduceOp::Max) ? ncclMax : ncclMin;
  }
  return nccl_reduction(op);
}

void check_nccl_tensor(const at::Tensor& tensor, int device, const char* operation, const char* role) {
  const std::string what = std::string(operation) + ": the " + role + " tensor";
  if (!tensor.defined()) throw ConfigError(what + " is undefined.");
  if (!tensor.device().is_cuda()) {
    throw ConfigError(what + " is on " + tensor.device().str() +
                      ", but the NCCL backend carries CUDA tensors. Use the process group's routing "
                      "(ProcessGroup) or move the tensor to cuda:" +
                      std::to_string(device) + ".");
  }
  if (tensor.get_device() != device) {
    throw ConfigError(what + " is on " + tensor.device().str() + ", but this rank's NCCL communicator uses cuda:" +
                      std::to_string(device) + ". Move the tensor to cuda:" + std::to_string(device) +
                      " (the State's device), or create the process group on its device.");
  }
  if (tensor.layout() != c10::kStrided) {
    throw ConfigError(what +
                      " has a non-strided layout; the NCCL backend carries dense "
                      "tensors only. Convert it with .to_dense() first.");
  }
  if (!tensor.is_contiguous()) {
    std::ostringstream strides;
    strides << tensor.strides();
    throw ConfigError(what + " " + shape_of(tensor) + " is not contiguous (strides " + strides.str() +
                      "); the NCCL backend hands NCCL the tensor's memory as it is and does not stage "
                      "copies on the GPU. Pass tensor.contiguous() (and copy a result back into the view "
                      "yourself).");
  }
}

// --- bootstrap ----------------------------------------------------------------

ncclUniqueId exchange_nccl_unique_id(MPI_Comm comm, int root, std::chrono::milliseconds timeout) {
  int rank = 0;
  int size = 1;
  ACCELERATE_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ACCELERATE_MPI_CHECK(MPI_Comm_size(comm, &size));
  if (root < 0 || root >= size) {
    throw ConfigError("exchange_nccl_unique_id: root " + std::to_string(root) +
                      " is not a rank of the communicator (ranks 0.." + std::to_string(size - 1) + ").");
  }
  // The root's success travels with the id, so that a failing
  // ncclGetUniqueId fails every rank instead of leaving them waiting.
  struct Packet {
    int32_t ok;
    ncclUniqueId id;
  } packet{};
  std::exception_ptr failure;
  if (rank == root) {
    try {
      ACCELERATE_NCCL_CHECK(ncclGetUniqueId(&packet.id), nullptr);
      packet.ok = 1;
    } catch (const Error&) {
      failure = std::current_exception();
    }
  }
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Ibcast(&packet, sizeof(packet), MPI_BYTE, root, comm, &request));
  wait_with_timeout(request, timeout,
                    "exchange_nccl_unique_id: MPI_Ibcast of the NCCL unique id from rank " + std::to_string(root),
                    comm);
  if (failure) std::rethrow_exception(failure);
  if (packet.ok != 1) {
    throw NcclError("exchange_nccl_unique_id: rank " + std::to_string(root) +
                        " could not create the NCCL unique id (ncclGetUniqueId failed there; its output names "
                        "the cause, often no usable network interface: see NCCL_SOCKET_IFNAME).",
                    static_cast<int>(ncclRemoteError));
  }
  return packet.id;
}

// --- NcclWork -----------------------------------------------------------------

NcclWork::NcclWork(std::string description, std::shared_ptr<NcclResources> resources, CudaEvent done,
                   std::vector<at::Tensor> keep_alive, TimeoutPolicy policy)
    : description_(std::move(description)),
      resources_(std::move(resources)),
      done_event_(std::move(done)),
      keep_alive_(std::move(keep_alive)),
      policy_(policy),
      posted_(std::chrono::steady_clock::now()) {}

NcclWork::~NcclWork() {
  if (!done_) complete_dropped_work(*this);
}

void NcclWork::finish() noexcept {
  done_ = true;
  keep_alive_.clear();
}

void NcclWork::fail(std::exception_ptr error) noexcept {
  done_ = true;
  error_ = std::move(error);
  abandon(keep_alive_);
}

void NcclWork::poll() noexcept {
  if (done_) return;
  NcclComm& comm = resources_->comm;
  try {
    // After an abort the event completes too (NCCL's kernels quit), but the
    // data is not valid: check the communicator first.
    if (comm.aborted()) throw NcclError(aborted_message(description_, *resources_), static_cast<int>(ncclInvalidUsage));
    const cudaError_t state = cudaEventQuery(done_event_.get());
    if (state == cudaSuccess) {
      finish();
      return;
    }
    if (state != cudaErrorNotReady) throw_cuda_error(state, "cudaEventQuery(completion event)", __FILE__, __LINE__);
    const ncclResult_t async = comm.async_error();
    if (async != ncclSuccess && async != ncclInProgress) {
      const char* detail = ncclGetLastError(comm.get());
      const std::string message =
          where() + " " + description_ + " on group '" + resources_->group + "' failed: NCCL reported " +
          ncclGetErrorString(async) + (detail != nullptr && detail[0] != '\0' ? std::string(" (") + detail + ")" : "") +
          ", NCCL " + nccl_runtime_version() +
          ". The communicator has been aborted. If a peer failed, the first error in the job log names it; "
          "rerun with NCCL_DEBUG=WARN for NCCL's own account.";
      comm.abort(message);
      throw NcclError(message, static_cast<int>(async));
    }
  } catch (...) {
    fail(std::current_exception());
  }
}

bool NcclWork::is_completed() {
  poll();
  return done_;
}

void NcclWork::wait() {
  // The stream current now waits, whichever was current when the work was
  // posted (as with c10d's Work::wait). Once done_ the host has seen the
  // event complete, so later work on any stream already follows it.
  if (!done_) {
    try {
      const CudaDeviceGuard guard(resources_->device);
      ACCELERATE_CUDA_CHECK(cudaStreamWaitEvent(caller_stream(resources_->device), done_event_.get(), 0));
    } catch (...) {
      fail(std::current_exception());
    }
  }
  // The library's waiting policy (as MpiWork's): spin, then yield, then
  // sleep, so that a waiting rank leaves the cores to ranks still computing.
  if (!done_ && !poll_until(
                    posted_ + policy_.timeout, [this] { return is_completed(); }, [] {})) {
    report_timeout(std::chrono::steady_clock::now() - posted_);
  }
  if (error_) std::rethrow_exception(error_);
}

void NcclWork::report_timeout(std::chrono::steady_clock::duration waited) {
  const std::string message =
      where() + " NCCL collective timeout: " + description_ + " on group '" + resources_->group +
      "' did not complete after " + seconds_text(waited) + " s" + at_training_step() +
      ". A rank never reached it (it crashed, hangs, or took a different code path; its own output names the "
      "cause), or this GPU is stuck in earlier work. The NCCL communicator has been aborted (ncclCommAbort), so "
      "the group can no longer carry CUDA tensors. Raise the limit with InitProcessGroupKwargs::timeout or "
      "ACCELERATE_TIMEOUT if the work between collectives is legitimately slow.";
  if (policy_.abort_job) {
    // Print first: the message must reach the log even if the abort hangs.
    std::fprintf(stderr, "%s Aborting the job.\n", message.c_str());
    std::fflush(stderr);
    resources_->comm.abort("timeout of " + description_);
    abort_running_mpi(3);
  }
  resources_->comm.abort("timeout of " + description_);
  fail(std::make_exception_ptr(TimeoutError(message)));
  std::rethrow_exception(error_);
}

// --- NcclBackend --------------------------------------------------------------

namespace {

class NcclBackend final : public Backend {
 public:
  NcclBackend(std::shared_ptr<NcclResources> resources, TimeoutPolicy policy)
      : resources_(std::move(resources)), policy_(policy) {}

  [[nodiscard]] std::string_view name() const override { return "nccl"; }
  [[nodiscard]] const NcclResources& resources() const noexcept { return *resources_; }
  [[nodiscard]] int rank() const override { return resources_->rank; }
  [[nodiscard]] int size() const override { return resources_->size; }

  std::unique_ptr<Work> all_reduce(at::Tensor& tensor, const AllReduceOptions& options) override;
  std::unique_ptr<Work> broadcast(at::Tensor& tensor, const BroadcastOptions& options) override;
  std::unique_ptr<Work> all_gather(at::Tensor& output, const at::Tensor& input,
                                   const AllGatherOptions& options) override;
  std::unique_ptr<Work> all_gather_v(at::Tensor& output, const at::Tensor& input, std::span<const int64_t> counts,
                                     const AllGatherOptions& options) override;
  std::unique_ptr<Work> gather(at::Tensor& output, const at::Tensor& input, const GatherOptions& options) override;
  std::unique_ptr<Work> scatter(at::Tensor& output, const at::Tensor& input, const ScatterOptions& options) override;
  std::unique_ptr<Work> reduce_scatter(at::Tensor& output, const at::Tensor& input,
                                       const ReduceScatterOptions& options) override;
  std::unique_ptr<Work> all_to_all(at::Tensor& output, const at::Tensor& input,
                                   const AllToAllOptions& options) override;
  std::unique_ptr<Work> barrier(const BarrierOptions& options) override;

 private:
  // Orders the backend stream after the caller's, lets `enqueue(comm,
  // stream)` issue the NCCL calls, and records the completion event.
  template <typename Enqueue>
  std::unique_ptr<Work> post(std::string description, std::vector<at::Tensor> keep_alive, const Timeout& timeout,
                             Enqueue&& enqueue);
  void check_tensor(const at::Tensor& tensor, const char* operation, const char* role) const {
    check_nccl_tensor(tensor, resources_->device, operation, role);
  }

  std::shared_ptr<NcclResources> resources_;
  TimeoutPolicy policy_;
};

template <typename Enqueue>
std::unique_ptr<Work> NcclBackend::post(std::string description, std::vector<at::Tensor> keep_alive,
                                        const Timeout& timeout, Enqueue&& enqueue) {
  NcclComm& comm = resources_->comm;
  if (comm.aborted() || comm.get() == nullptr) {
    throw NcclError(aborted_message(description, *resources_), static_cast<int>(ncclInvalidUsage));
  }
  const CudaDeviceGuard guard(resources_->device);
  const cudaStream_t stream = resources_->stream.get();
  const CudaEvent ready;
  CudaEvent done;
  ACCELERATE_CUDA_CHECK(cudaEventRecord(ready.get(), caller_stream(resources_->device)));
  ACCELERATE_CUDA_CHECK(cudaStreamWaitEvent(stream, ready.get(), 0));
  enqueue(comm.get(), stream);
  ACCELERATE_CUDA_CHECK(cudaEventRecord(done.get(), stream));
  TimeoutPolicy policy = policy_;
  if (timeout) policy.timeout = *timeout;
  return std::make_unique<NcclWork>(std::move(description), resources_, std::move(done), std::move(keep_alive), policy);
}

std::unique_ptr<Work> NcclBackend::all_reduce(at::Tensor& tensor, const AllReduceOptions& options) {
  check_tensor(tensor, "all_reduce", "input");
  const ncclDataType_t type = nccl_datatype(tensor.scalar_type());
  const ncclRedOp_t op = nccl_reduction(options.op, tensor.scalar_type(), "all_reduce");
  void* data = tensor.data_ptr();
  const std::size_t count = count_of(tensor);
  return post("all_reduce(" + std::string(to_string(options.op)) + ") " + shape_of(tensor), {tensor}, options.timeout,
              [&](ncclComm_t comm, cudaStream_t stream) {
                if (count > 0) ACCELERATE_NCCL_CHECK(ncclAllReduce(data, data, count, type, op, comm, stream), comm);
              });
}

std::unique_ptr<Work> NcclBackend::broadcast(at::Tensor& tensor, const BroadcastOptions& options) {
  check_tensor(tensor, "broadcast", "input");
  const ncclDataType_t type = nccl_datatype(tensor.scalar_type());
  void* data = tensor.data_ptr();
  const std::size_t count = count_of(tensor);
  const int root = options.root;
  return post("broadcast(root " + std::to_string(root) + ") " + shape_of(tensor), {tensor}, options.timeout,
              [&](ncclComm_t comm, cudaStream_t stream) {
                if (count > 0) ACCELERATE_NCCL_CHECK(ncclBroadcast(data, data, count, type, root, comm, stream), comm);
              });
}

std::unique_ptr<Work> NcclBackend::all_gather(at::Tensor& output, const at::Tensor& input,
                                              const AllGatherOptions& options) {
  check_tensor(input, "all_gather", "input");
  check_tensor(output, "all_gather", "output");
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  const std::size_t count = count_of(input);
  return post("all_gather " + shape_of(input), {input, output}, options.timeout,
              [&](ncclComm_t comm, cudaStream_t stream) {
                if (count > 0) {
                  ACCELERATE_NCCL_CHECK(ncclAllGather(input.data_ptr(), output.data_ptr(), count, type, comm, stream),
                                        comm);
                }
              });
}

std::unique_ptr<Work> NcclBackend::all_gather_v(at::Tensor& output, const at::Tensor& input,
                                                std::span<const int64_t> counts, const AllGatherOptions& options) {
  check_tensor(input, "all_gather_v", "input");
  check_tensor(output, "all_gather_v", "output");
  const int rank = resources_->rank;
  const int size = resources_->size;
  int64_t row_elements = 1;  // elements per row: the product of the trailing dimensions
  for (int64_t d = 1; d < input.dim(); ++d) row_elements *= input.size(d);
  const auto row = static_cast<std::size_t>(row_elements);
  std::vector<std::size_t> offsets(counts.size());  // in elements
  int64_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = static_cast<std::size_t>(total);
    total += counts[r] * static_cast<int64_t>(row);
  }
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  const std::size_t element = input.element_size();
  return post("all_gather_v " + shape_of(input), {input, output}, options.timeout,
              [&](ncclComm_t comm, cudaStream_t stream) {
                const std::size_t mine = count_of(input);
                copy_on_stream(bytes_at(output, offsets[static_cast<std::size_t>(rank)] * element), input.data_ptr(),
                               mine * element, stream);
                NcclGroup group(comm);
                for (int peer = 0; peer < size; ++peer) {
                  if (peer == rank) continue;
                  const auto theirs = static_cast<std::size_t>(counts[static_cast<std::size_t>(peer)]) * row;
                  if (mine > 0) ACCELERATE_NCCL_CHECK(ncclSend(input.data_ptr(), mine, type, peer, comm, stream), comm);
                  if (theirs > 0) {
                    ACCELERATE_NCCL_CHECK(ncclRecv(bytes_at(output, offsets[static_cast<std::size_t>(peer)] * element),
                                                   theirs, type, peer, comm, stream),
                                          comm);
                  }
                }
                group.end();
              });
}

std::unique_ptr<Work> NcclBackend::gather(at::Tensor& output, const at::Tensor& input, const GatherOptions& options) {
  check_tensor(input, "gather", "input");
  const int rank = resources_->rank;
  const int size = resources_->size;
  const int root = options.root;
  const bool is_root = rank == root;
  if (is_root) {
    check_tensor(output, "gather", "output");
  }
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  const std::size_t count = count_of(input);
  const std::size_t block = bytes_of(input);
  std::vector<at::Tensor> keep{input};
  if (is_root) keep.push_back(output);
  return post("gather(root " + std::to_string(root) + ") " + shape_of(input), std::move(keep), options.timeout,
              [&](ncclComm_t comm, cudaStream_t stream) {
                if (count == 0) return;
                if (!is_root) {
                  NcclGroup group(comm);
                  ACCELERATE_NCCL_CHECK(ncclSend(input.data_ptr(), count, type, root, comm, stream), comm);
                  group.end();
                  return;
                }
                copy_on_stream(bytes_at(output, static_cast<std::size_t>(rank) * block), input.data_ptr(), block,
                               stream);
                NcclGroup group(comm);
                for (int peer = 0; peer < size; ++peer) {
                  if (peer == rank) continue;
                  ACCELERATE_NCCL_CHECK(ncclRecv(bytes_at(output, static_cast<std::size_t>(peer) * block), count, type,
                                                 peer, comm, stream),
                                        comm);
                }
                group.end();
              });
}

std::unique_ptr<Work> NcclBackend::scatter(at::Tensor& output, const at::Tensor& input, const ScatterOptions& options) {
  check_tensor(output, "scatter", "output");
  const int rank = resources_->rank;
  const int size = resources_->size;
  const int root = options.root;
  const bool is_root = rank == root;
  if (is_root) {
    check_tensor(input, "scatter", "input");
  }
  const ncclDataType_t type = nccl_datatype(output.scalar_type());
  const std::size_t count = count_of(output);
  const std::size_t block = bytes_of(output);
  std::vector<at::Tensor> keep{output};
  if (is_root) keep.push_back(input);
  return post("scatter(root " + std::to_string(root) + ") " + shape_of(output), std::move(keep), options.timeout,
              [&](ncclComm_t comm, cudaStream_t stream) {
                if (count == 0) return;
                if (!is_root) {
                  NcclGroup group(comm);
                  ACCELERATE_NCCL_CHECK(ncclRecv(output.data_ptr(), count, type, root, comm, stream), comm);
                  group.end();
                  return;
                }
                copy_on_stream(output.data_ptr(), bytes_at(input, static_cast<std::size_t>(rank) * block), block,
                               stream);
                NcclGroup group(comm);
                for (int peer = 0; peer < size; ++peer) {
                  if (peer == rank) continue;
                  ACCELERATE_NCCL_CHECK(ncclSend(bytes_at(input, static_cast<std::size_t>(peer) * block), count, type,
                                                 peer, comm, stream),
                                        comm);
                }
                group.end();
              });
}

std::unique_ptr<Work> NcclBackend::reduce_scatter(at::Tensor& output, const at::Tensor& input,
                                                  const ReduceScatterOptions& options) {
  check_tensor(input, "reduce_scatter", "input");
  check_tensor(output, "reduce_scatter", "output");
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  const ncclRedOp_t op = nccl_reduction(options.op, input.scalar_type(), "reduce_scatter");
  const std::size_t count = count_of(output);
  return post("reduce_scatter(" + std::string(to_string(options.op)) + ") " + shape_of(input), {input, output},
              options.timeout, [&](ncclComm_t comm, cudaStream_t stream) {
                if (count > 0) {
                  ACCELERATE_NCCL_CHECK(ncclReduceScatter(input.data_ptr(), output.data_ptr(), count, type, op, comm,
                                                          stream),
                                        comm);
                }
              });
}

std::unique_ptr<Work> NcclBackend::all_to_all(at::Tensor& output, const at::Tensor& input,
                                              const AllToAllOptions& options) {
  check_tensor(input, "all_to_all", "input");
  check_tensor(output, "all_to_all", "output");
  const int rank = resources_->rank;
  const int size = resources_->size;
  if (input.data_ptr() == output.data_ptr() && input.numel() > 0) {
    throw ConfigError(
        "all_to_all: the input and the output share memory; NCCL's sends and receives "
        "run concurrently, so all_to_all cannot work in place. Pass a separate output tensor.");
  }
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  const std::size_t count = count_of(input) / static_cast<std::size_t>(size);
  const std::size_t block = count * input.element_size();
  return post("all_to_all " + shape_of(input), {input, output}, options.timeout,
              [&](ncclComm_t comm, cudaStream_t stream) {
                if (count == 0) return;
                const auto block_of = [block](const at::Tensor& tensor, int r) {
                  return bytes_at(tensor, static_cast<std::size_t>(r) * block);
                };
                copy_on_stream(block_of(output, rank), block_of(input, rank), block, stream);
                NcclGroup group(comm);
                for (int peer = 0; peer < size; ++peer) {
                  if (peer == rank) continue;
                  ACCELERATE_NCCL_CHECK(ncclSend(block_of(input, peer), count, type, peer, comm, stream), comm);
                  ACCELERATE_NCCL_CHECK(ncclRecv(block_of(output, peer), count, type, peer, comm, stream), comm);
                }
                group.end();
              });
}

std::unique_ptr<Work> NcclBackend::barrier(const BarrierOptions& options) {
  void* buffer = resources_->barrier_buffer.get();
  return post("barrier", {}, options.timeout, [&](ncclComm_t comm, cudaStream_t stream) {
    ACCELERATE_NCCL_CHECK(ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, comm, stream), comm);
  });
}

// This rank's verdict on `device`, as an exception (nullptr: usable).
std::exception_ptr probe_device(int device, const std::string& group) {
  const std::string what = "make_nccl_backend (group '" + group + "'): ";
  try {
    if (device < 0) {
      throw ConfigError(what + "device index " + std::to_string(device) +
                        " is not a CUDA device; pass the index of this rank's GPU (the State's device, cuda:N).");
    }
    int count = 0;
    const cudaError_t code = cudaGetDeviceCount(&count);
    if (code != cudaSuccess) {
      cudaGetLastError();  // clear it: later, unrelated calls must not report it again
      throw CudaError(what + "the NCCL backend needs GPU cuda:" + std::to_string(device) +
                          ", but CUDA finds no usable GPU on this rank (cudaGetDeviceCount: " + cudaGetErrorName(code) +
                          ": " + cudaGetErrorString(code) + "). " + no_gpu_remedy(),
                      static_cast<int>(code));
    }
    if (count == 0) {
      throw ConfigError(what + "the NCCL backend needs GPU cuda:" + std::to_string(device) +
                        ", but CUDA sees no GPU on this rank. " + no_gpu_remedy());
    }
    if (device >= count) {
      throw ConfigError(what + "the NCCL backend was asked for GPU cuda:" + std::to_string(device) +
                        ", but this rank sees only " + std::to_string(count) +
                        " GPU(s) (cuda:0..cuda:" + std::to_string(count - 1) + "; CUDA_VISIBLE_DEVICES " +
                        visible_devices_text() + "). Use a device below " + std::to_string(count) +
                        " (normally the local rank modulo the visible GPUs), or start fewer ranks per node or "
                        "request more GPUs per node.");
    }
  } catch (const Error&) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(MPI_Comm comm, int device, std::string group, TimeoutPolicy policy) {
  int rank = 0;
  int size = 1;
  ACCELERATE_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ACCELERATE_MPI_CHECK(MPI_Comm_size(comm, &size));

  // Every rank checks its GPU, and all agree before any of them throws: a
  // rank failing alone would leave the others waiting for the unique id.
  const std::exception_ptr local = probe_device(device, group);
  int mine = local ? 1 : 0;
  std::vector<int> failed(static_cast<std::size_t>(size));
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Iallgather(&mine, 1, MPI_INT, failed.data(), 1, MPI_INT, comm, &request));
  wait_with_timeout(request, policy.timeout, "make_nccl_backend: MPI_Iallgather of the GPU checks", comm);
  if (local) std::rethrow_exception(local);
  std::string failing;
  for (int r = 0; r < size; ++r) {
    if (failed[static_cast<std::size_t>(r)] != 0) failing += (failing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!failing.empty()) {
    throw ConfigError("make_nccl_backend (group '" + group + "'): rank(s) " + failing +
                      " of the group have no usable GPU (their own messages say why), so the NCCL "
                      "communicator cannot be created on any rank.");
  }

  // The communicator binds to the current device; restore the caller's after.
  const CudaDeviceGuard guard(device);
  auto resources = std::make_shared<NcclResources>(device, group, rank, size);
  const ncclUniqueId id = exchange_nccl_unique_id(comm, 0, policy.timeout);
  resources->comm = NcclComm::init_rank(size, id, rank);
  return std::make_unique<NcclBackend>(std::move(resources), policy);
}

namespace {

// This rank's verdict on splitting `parent`: what the versions allow, and
// only while the parent communicator is intact.
NcclSplitMethod local_split_method(const NcclComm& parent) noexcept {
  int runtime = 0;
  if (ncclGetVersion(&runtime) != ncclSuccess) runtime = 0;
  if (parent.aborted() || parent.get() == nullptr) return NcclSplitMethod::MpiBootstrap;
  return choose_nccl_split_method(NCCL_VERSION_CODE, runtime);
}

}  // namespace

static_assert(kNcclCommSplitVersion == NCCL_VERSION(2, 18, 0), "kNcclCommSplitVersion is NCCL 2.18.0");

std::unique_ptr<Backend> split_nccl_backend(Backend& parent, MPI_Comm parent_comm, MPI_Comm member_comm,
                                            std::string group, TimeoutPolicy policy) {
  const auto* nccl = dynamic_cast<const NcclBackend*>(&parent);
  if (nccl == nullptr) {
    throw ConfigError("split_nccl_backend (group '" + group + "'): the parent backend is '" +
                      std::string(parent.name()) + "', not 'nccl'.");
  }
  const NcclResources& from = nccl->resources();
  // ncclCommSplit is collective over the parent, so every rank must take
  // the same road: the split only if every rank can.
  int mine = local_split_method(from.comm) == NcclSplitMethod::CommSplit ? 1 : 0;
  int everyone = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Iallreduce(&mine, &everyone, 1, MPI_INT, MPI_MIN, parent_comm, &request));
  wait_with_timeout(request, policy.timeout,
                    "split_nccl_backend (group '" + group + "'): MPI_Iallreduce of the split method", parent_comm);
  const bool member = member_comm != MPI_COMM_NULL;
  if (everyone == 0) {
    if (!member) return nullptr;
    return make_nccl_backend(member_comm, from.device, std::move(group), policy);
  }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  int rank = 0;
  int size = 0;
  if (member) {
    ACCELERATE_MPI_CHECK(MPI_Comm_rank(member_comm, &rank));
    ACCELERATE_MPI_CHECK(MPI_Comm_size(member_comm, &size));
  }
  const CudaDeviceGuard guard(from.device);
  std::shared_ptr<NcclResources> resources;
  if (member) resources = std::make_shared<NcclResources>(from.device, group, rank, size);
  // The key orders the members as member_comm does; NCCL_SPLIT_NOCOLOR
  // takes part in the split without joining (the child is nullptr there).
  ncclComm_t child = nullptr;
  ACCELERATE_NCCL_CHECK(ncclCommSplit(from.comm.get(), member ? 0 : NCCL_SPLIT_NOCOLOR, rank, &child, nullptr),
                        from.comm.get());
  if (!member) return nullptr;
  resources->comm = NcclComm(child);
  return std::make_unique<NcclBackend>(std::move(resources), policy);
#else
  throw ConfigError("split_nccl_backend: ncclCommSplit chosen without NCCL 2.18 headers (a bug).");
#endif
}

}  // namespace accelerate::detail
