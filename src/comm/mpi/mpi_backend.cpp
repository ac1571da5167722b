#include "comm/mpi/mpi_backend.hpp"

#include <ATen/ATen.h>

#include <climits>
#include <numeric>
#include <sstream>
#include <utility>

#include "accelerate/error.hpp"
#include "comm/mpi/mpi_tuning.hpp"
#include "detail/mpi_check.hpp"

namespace accelerate::detail {
namespace {

void check_cpu(const at::Tensor& tensor, const char* operation, const char* role) {
  if (!tensor.defined()) {
    throw ConfigError(std::string(operation) + ": the " + role + " tensor is undefined.");
  }
  if (!tensor.device().is_cpu()) {
    throw ConfigError(std::string(operation) + ": the MPI backend carries CPU tensors, but the " + role +
                      " tensor is on " + tensor.device().str() +
                      ". Use the process group's routing (ProcessGroup) or move the tensor to the CPU.");
  }
}

int mpi_count(int64_t elements, const char* operation) {
  if (elements > INT_MAX) {
    throw ConfigError(std::string(operation) + ": " + std::to_string(elements) +
                      " elements exceed MPI's int count; split the tensor into chunks below 2^31 elements.");
  }
  return static_cast<int>(elements);
}

// A contiguous stand-in for a caller's tensor. `data` is what MPI touches;
// `copy_back()` moves received data into a non-contiguous destination.
struct Staged {
  at::Tensor original;
  at::Tensor data;
  [[nodiscard]] bool staged() const { return !original.is_same(data); }
};

// The epilogue of an operation whose only post-processing is moving the
// received data into a non-contiguous destination.
std::function<void()> copy_back(Staged out) {
  return [out = std::move(out)]() mutable {
    if (out.staged()) out.original.copy_(out.data);
  };
}

Staged stage_input(const at::Tensor& tensor) { return {tensor, tensor.contiguous()}; }

Staged stage_output(const at::Tensor& tensor) {
  if (tensor.is_contiguous()) return {tensor, tensor};
  return {tensor, at::empty(tensor.sizes(), tensor.options().memory_format(c10::MemoryFormat::Contiguous))};
}

// What every collective from an input to an output tensor on each rank does
// first: both on the CPU, one dtype, both staged contiguous.
struct StagedPair {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  Staged in;
  Staged out;
};

StagedPair stage_pair(const MpiTypeTable& types, const at::Tensor& output, const at::Tensor& input,
                      const char* operation) {
  check_cpu(input, operation, "input");
  check_cpu(output, operation, "output");
  return {types.datatype(input.scalar_type()), stage_input(input), stage_output(output)};
}

}  // namespace

MpiBackend::MpiBackend(MPI_Comm comm, std::string group, TimeoutPolicy policy, SharedMemoryPlacement shared)
    : group_(std::move(group)), policy_(policy) {
  ACCELERATE_MPI_CHECK(MPI_Comm_dup(comm, comm_.out()));
  ACCELERATE_MPI_CHECK(MPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN));
  ACCELERATE_MPI_CHECK(MPI_Comm_rank(comm_.get(), &rank_));
  ACCELERATE_MPI_CHECK(MPI_Comm_size(comm_.get(), &size_));
  board_ = std::make_unique<ArrivalBoard>(comm_.get());
  nonblocking_allreduce_tuned_ = tune_nonblocking_allreduce();
  // Eagerly and collectively, as the communicator itself: made inside the
  // first all_reduce it would hang ranks that reach different collectives.
  if (shared.enabled) shared_ = SharedMemoryAllReduce::create(comm_.get(), shared.node);
}

std::string MpiBackend::all_reduce_algorithm() const {
  if (!shared_) return "mpi";
  return "shared memory (" + std::to_string(shared_->node_size()) + " ranks per node × " +
         std::to_string(shared_->node_count()) + (shared_->node_count() == 1 ? " node)" : " nodes)");
}

void MpiBackend::shared_memory_all_reduce(at::Tensor& data, const at::Tensor& original,
                                          const AllReduceOptions& options) {
  const MPI_Op op = types_.operation(options.op, data.scalar_type());
  const MPI_Datatype type = types_.datatype(data.scalar_type());
  (void)on_shared_memory({"all_reduce", to_string(options.op), -1, &original}, options.timeout,
                         [&](const SharedMemoryAllReduce::Waiting& waiting) {
                           return shared_->run(data, options.op, type, op, waiting);
                         });
}

std::unique_ptr<Work> MpiBackend::on_shared_memory(
    const OperationLabel& label, const Timeout& timeout,
    const std::function<SharedMemoryAllReduce::Outcome(const SharedMemoryAllReduce::Waiting&)>& collective) {
  TimeoutPolicy policy = policy_;
  if (timeout) policy.timeout = *timeout;
  const int64_t sequence = board_->arrive();
  const auto entered = std::chrono::steady_clock::now();
  if (!shared_->usable()) {
    raise_collective_timeout(label.render(), group_, sequence,
                             "unknown: an earlier collective on this group timed out and left its shared memory "
                             "out of step; the group cannot be used again",
                             std::chrono::steady_clock::duration{}, policy, comm_.get());
  }
  const auto outcome = collective({entered + policy.timeout, [this] { board_->serve_queries(); }});
  if (!outcome.completed) {
    // The board tells a rank that is elsewhere from one that never answers;
    // the segment, one that entered and stopped inside.
    std::string missing = board_->missing_ranks(sequence, std::chrono::seconds(2));
    if (missing.empty()) missing = outcome.missing;
    raise_collective_timeout(label.render(), group_, sequence, std::move(missing),
                             std::chrono::steady_clock::now() - entered, policy, comm_.get());
  }
  return completed_work(label.render());
}

MpiBackend::~MpiBackend() = default;

std::unique_ptr<Work> MpiBackend::post(OperationLabel label, MPI_Request request, int64_t sequence,
                                       std::vector<at::Tensor> keep_alive, std::function<void()> epilogue,
                                       const Timeout& timeout) {
  TimeoutPolicy policy = policy_;
  if (timeout) policy.timeout = *timeout;
  return std::make_unique<MpiWork>(std::move(label), request, std::move(keep_alive), std::move(epilogue), board_.get(),
                                   sequence, group_, policy, comm_.get());
}

std::unique_ptr<Work> MpiBackend::all_reduce(at::Tensor& tensor, const AllReduceOptions& options) {
  check_cpu(tensor, "all_reduce", "input");
  if (shared_) {
    // Shared memory completes in the call: the copies are the work, and no
    // thread is spare on a node whose cores all run ranks to do them later.
    all_reduce_blocking(tensor, options);
    return completed_work(OperationLabel{"all_reduce", to_string(options.op), -1, &tensor}.render());
  }
  const MPI_Op op = types_.operation(options.op, tensor.scalar_type());
  const MPI_Datatype type = types_.datatype(tensor.scalar_type());
  Staged buffer = stage_output(tensor);
  if (buffer.staged()) buffer.data.copy_(tensor);
  const int count = mpi_count(buffer.data.numel(), "all_reduce");
  const int64_t sequence = board_->arrive();
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer.data.data_ptr(), count, type, op, comm_.get(), &request));
  const bool average = options.op == ReduceOp::Avg;
  const int size = size_;
  auto epilogue = [buffer, average, size]() mutable {
    if (average) buffer.data.div_(size);
    if (buffer.staged()) buffer.original.copy_(buffer.data);
  };
  return post({"all_reduce", to_string(options.op), -1, &tensor}, request, sequence, {buffer.original, buffer.data},
              std::move(epilogue), options.timeout);
}

void MpiBackend::all_reduce_blocking(at::Tensor& tensor, const AllReduceOptions& options) {
  check_cpu(tensor, "all_reduce", "input");
  if (shared_) {
    Staged buffer = stage_output(tensor);
    if (buffer.staged()) buffer.data.copy_(tensor);
    shared_memory_all_reduce(buffer.data, tensor, options);
    if (buffer.staged()) buffer.original.copy_(buffer.data);
    return;
  }
  const bool small = tensor.numel() * static_cast<int64_t>(tensor.element_size()) < kBlockingAllReduceBytes;
  if (!small && nonblocking_allreduce_tuned_) {
    all_reduce(tensor, options)->wait();
    return;
  }
  const MPI_Op op = types_.operation(options.op, tensor.scalar_type());
  const MPI_Datatype type = types_.datatype(tensor.scalar_type());
  Staged buffer = stage_output(tensor);
  if (buffer.staged()) buffer.data.copy_(tensor);
  const int count = mpi_count(buffer.data.numel(), "all_reduce");
  // Arrival first, under the deadline: once every rank is past the barrier,
  // the blocking collective can only stall if a process dies inside it,
  // which the launcher turns into a job failure.
  const int64_t sequence = board_->arrive();
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Ibarrier(comm_.get(), &request));
  post({"all_reduce", to_string(options.op), -1, &tensor}, request, sequence, {}, nullptr, options.timeout)->wait();
  ACCELERATE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buffer.data.data_ptr(), count, type, op, comm_.get()));
  if (options.op == ReduceOp::Avg) buffer.data.div_(size_);
  if (buffer.staged()) buffer.original.copy_(buffer.data);
}

at::Tensor MpiBackend::make_all_reduce_buffer(int64_t numel, const at::TensorOptions& options) {
  if (!shared_ || !shared_->usable()) return Backend::make_all_reduce_buffer(numel, options);
  // Every rank arrives under the deadline first: making the segment takes
  // blocking calls, which are then sure to complete.
  const int64_t sequence = board_->arrive();
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Ibarrier(comm_.get(), &request));
  post({"all_reduce_buffer", {}, -1, nullptr}, request, sequence, {}, nullptr, std::nullopt)->wait();
  // Each rank maps the other ranks' parts at its own size: they must agree.
  const auto bytes = static_cast<long long>(numel) * static_cast<long long>(options.dtype().itemsize());
  const auto dtype = static_cast<long long>(c10::typeMetaToScalarType(options.dtype()));
  long long extremes[4] = {bytes, -bytes, dtype, -dtype};
  ACCELERATE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, extremes, 4, MPI_LONG_LONG, MPI_MAX, comm_.get()));
  if (extremes[2] != -extremes[3]) {
    throw ConfigError("all_reduce_buffer on group '" + group_ + "': the ranks asked for different dtypes (this rank " +
                      std::string(c10::toString(c10::typeMetaToScalarType(options.dtype()))) +
                      "). Every rank must ask for the same size and dtype, in the same order.");
  }
  if (extremes[0] != -extremes[1]) {
    throw ConfigError("all_reduce_buffer on group '" + group_ + "': the ranks asked for buffers of " +
                      std::to_string(-extremes[1]) + " to " + std::to_string(extremes[0]) + " bytes (this rank " +
                      std::to_string(bytes) + "). Every rank must ask for the same size and dtype, in the same order.");
  }
  // Up to kWholeMessageBytes the all-reduce synchronises once and copies
  // anyway: a buffer in the segment would gain nothing there.
  at::Tensor buffer;
  if (bytes > static_cast<long long>(SharedMemoryAllReduce::kWholeMessageBytes)) {
    buffer = shared_->make_buffer(numel, options);
  }
  return buffer.defined() ? buffer : Backend::make_all_reduce_buffer(numel, options);
}

std::unique_ptr<Work> MpiBackend::broadcast(at::Tensor& tensor, const BroadcastOptions& options) {
  check_cpu(tensor, "broadcast", "input");
  const MPI_Datatype type = types_.datatype(tensor.scalar_type());
  Staged buffer = stage_output(tensor);
  if (buffer.staged() && rank_ == options.root) buffer.data.copy_(tensor);
  const int count = mpi_count(buffer.data.numel(), "broadcast");
  const int64_t sequence = board_->arrive();
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Ibcast(buffer.data.data_ptr(), count, type, options.root, comm_.get(), &request));
  const bool receiver = rank_ != options.root;
  auto epilogue = [buffer, receiver]() mutable {
    if (receiver && buffer.staged()) buffer.original.copy_(buffer.data);
  };
  return post({"broadcast", {}, options.root, &tensor}, request, sequence, {buffer.original, buffer.data},
              std::move(epilogue), options.timeout);
}

std::unique_ptr<Work> MpiBackend::all_gather(at::Tensor& output, const at::Tensor& input,
                                             const AllGatherOptions& options) {
  const auto [type, in, out] = stage_pair(types_, output, input, "all_gather");
  if (shared_ && shared_->node_count() == 1) {
    // One node: through shared memory, completed within the call.
    auto work = on_shared_memory({"all_gather", {}, -1, &input}, options.timeout,
                                 [&](const SharedMemoryAllReduce::Waiting& waiting) {
                                   at::Tensor result = out.data;
                                   return shared_->all_gather(result, in.data, waiting);
                                 });
    if (out.staged()) out.original.copy_(out.data);
    return work;
  }
  const int count = mpi_count(in.data.numel(), "all_gather");
  mpi_count(out.data.numel(), "all_gather");
  const int64_t sequence = board_->arrive();
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(
      MPI_Iallgather(in.data.data_ptr(), count, type, out.data.data_ptr(), count, type, comm_.get(), &request));
  auto epilogue = copy_back(out);
  return post({"all_gather", {}, -1, &input}, request, sequence, {in.data, out.original, out.data}, std::move(epilogue),
              options.timeout);
}

std::unique_ptr<Work> MpiBackend::all_gather_v(at::Tensor& output, const at::Tensor& input,
                                               std::span<const int64_t> counts, const AllGatherOptions& options) {
  const auto [type, in, out] = stage_pair(types_, output, input, "all_gather_v");
  int64_t row = 1;
  for (int64_t d = 1; d < input.dim(); ++d) row *= input.size(d);
  // Non-blocking collectives may read the count arrays until they complete
  // (MPI 3.1 §5.12), so the arrays live as long as the Work.
  auto layout = std::make_shared<std::pair<std::vector<int>, std::vector<int>>>();
  auto& element_counts = layout->first;
  auto& displacements = layout->second;
  element_counts.resize(counts.size());
  displacements.resize(counts.size());
  int64_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    element_counts[r] = mpi_count(counts[r] * row, "all_gather_v");
    displacements[r] = mpi_count(total, "all_gather_v");
    total += counts[r] * row;
  }
  const int64_t sequence = board_->arrive();
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Iallgatherv(in.data.data_ptr(), element_counts[static_cast<std::size_t>(rank_)], type,
                                       out.data.data_ptr(), element_counts.data(), displacements.data(), type,
                                       comm_.get(), &request));
  auto epilogue = [copy = copy_back(out), layout] { copy(); };
  return post({"all_gather_v", {}, -1, &input}, request, sequence, {in.data, out.original, out.data},
              std::move(epilogue), options.timeout);
}

std::unique_ptr<Work> MpiBackend::gather(at::Tensor& output, const at::Tensor& input, const GatherOptions& options) {
  check_cpu(input, "gather", "input");
  const bool root = rank_ == options.root;
  if (root) {
    check_cpu(output, "gather", "output");
  }
  const MPI_Datatype type = types_.datatype(input.scalar_type());
  const Staged in = stage_input(input);
  Staged out = root ? stage_output(output) : Staged{};
  const int count = mpi_count(in.data.numel(), "gather");
  const int64_t sequence = board_->arrive();
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Igather(in.data.data_ptr(), count, type, root ? out.data.data_ptr() : nullptr, count, type,
                                   options.root, comm_.get(), &request));
  auto epilogue = [out, root]() mutable {
    if (root && out.staged()) out.original.copy_(out.data);
  };
  std::vector<at::Tensor> keep{in.data};
  if (root) keep.insert(keep.end(), {out.original, out.data});
  return post({"gather", {}, options.root, &input}, request, sequence, std::move(keep), std::move(epilogue),
              options.timeout);
}

std::unique_ptr<Work> MpiBackend::scatter(at::Tensor& output, const at::Tensor& input, const ScatterOptions& options) {
  check_cpu(output, "scatter", "output");
  const bool root = rank_ == options.root;
  if (root) {
    check_cpu(input, "scatter", "input");
  }
  const MPI_Datatype type = types_.datatype(output.scalar_type());
  const Staged in = root ? stage_input(input) : Staged{};
  Staged out = stage_output(output);
  const int count = mpi_count(out.data.numel(), "scatter");
  const int64_t sequence = board_->arrive();
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Iscatter(root ? in.data.data_ptr() : nullptr, count, type, out.data.data_ptr(), count, type,
                                    options.root, comm_.get(), &request));
  auto epilogue = copy_back(out);
  std::vector<at::Tensor> keep{out.original, out.data};
  if (root) keep.push_back(in.data);
  return post({"scatter", {}, options.root, &output}, request, sequence, std::move(keep), std::move(epilogue),
              options.timeout);
}

std::unique_ptr<Work> MpiBackend::reduce_scatter(at::Tensor& output, const at::Tensor& input,
                                                 const ReduceScatterOptions& options) {
  const auto [type, in, out] = stage_pair(types_, output, input, "reduce_scatter");
  const MPI_Op op = types_.operation(options.op, input.scalar_type());
  if (shared_ && shared_->node_count() == 1) {
    // One node: through shared memory, completed within the call.
    auto work = on_shared_memory({"reduce_scatter", to_string(options.op), -1, &input}, options.timeout,
                                 [&](const SharedMemoryAllReduce::Waiting& waiting) {
                                   at::Tensor result = out.data;
                                   return shared_->reduce_scatter(result, in.data, options.op, waiting);
                                 });
    if (out.staged()) out.original.copy_(out.data);
    return work;
  }
  const int count = mpi_count(out.data.numel(), "reduce_scatter");
  mpi_count(in.data.numel(), "reduce_scatter");
  const int64_t sequence = board_->arrive();
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(
      MPI_Ireduce_scatter_block(in.data.data_ptr(), out.data.data_ptr(), count, type, op, comm_.get(), &request));
  const bool average = options.op == ReduceOp::Avg;
  const int size = size_;
  auto epilogue = [out = out, average, size]() mutable {
    if (average) out.data.div_(size);
    if (out.staged()) out.original.copy_(out.data);
  };
  return post({"reduce_scatter", to_string(options.op), -1, &input}, request, sequence,
              {in.data, out.original, out.data}, std::move(epilogue), options.timeout);
}

std::unique_ptr<Work> MpiBackend::all_to_all(at::Tensor& output, const at::Tensor& input,
                                             const AllToAllOptions& options) {
  const auto [type, in, out] = stage_pair(types_, output, input, "all_to_all");
  const int block = mpi_count(in.data.numel() / size_, "all_to_all");
  mpi_count(in.data.numel(), "all_to_all");
  const int64_t sequence = board_->arrive();
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(
      MPI_Ialltoall(in.data.data_ptr(), block, type, out.data.data_ptr(), block, type, comm_.get(), &request));
  auto epilogue = copy_back(out);
  return post({"all_to_all", {}, -1, &input}, request, sequence, {in.data, out.original, out.data}, std::move(epilogue),
              options.timeout);
}

std::unique_ptr<Work> MpiBackend::barrier(const BarrierOptions& options) {
  const int64_t sequence = board_->arrive();
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Ibarrier(comm_.get(), &request));
  return post({"barrier", {}, -1, nullptr}, request, sequence, {}, nullptr, options.timeout);
}

}  // namespace accelerate::detail
