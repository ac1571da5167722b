#include "accelerate/comm/process_group.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <climits>
#include <numeric>
#include <set>
#include <string_view>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/env_config.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "comm/debug_check.hpp"
#include "comm/mpi/mpi_backend.hpp"
#include "comm/object_serialization.hpp"
#include "comm/tensor_checks.hpp"
#include "detail/arrival_board.hpp"
#include "detail/blocking_call_watchdog.hpp"
#include "detail/deadline_comm.hpp"
#include "detail/fnv1a.hpp"
#include "detail/mpi_check.hpp"
#include "detail/profile_range.hpp"
#include "detail/unique_comm.hpp"
#if ACCELERATE_HAVE_NCCL
#include "comm/nccl/nccl_backend.hpp"
#include "comm/nccl/shared_gpu.hpp"
#endif

namespace accelerate {
namespace {

using detail::ShapeRule;

// Shape of the output of a [k, …] -> [n*k, …] collective.
std::vector<int64_t> stacked_sizes(const at::Tensor& input, int64_t factor) {
  std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end());
  if (sizes.empty()) {
    sizes.push_back(factor);
  } else {
    sizes[0] *= factor;
  }
  return sizes;
}

std::vector<int64_t> block_sizes(const at::Tensor& input, int parts, const char* operation) {
  if (input.dim() == 0 || input.size(0) % parts != 0) {
    throw ConfigError(detail::where() + " " + operation + ": the input's first dimension (" +
                      (input.dim() == 0 ? std::string("none, 0-d tensor") : std::to_string(input.size(0))) +
                      ") must be a multiple of the group size " + std::to_string(parts) + ".");
  }
  std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end());
  sizes[0] /= parts;
  return sizes;
}

// The "[0,2,3]" part of a group's name.
std::string rank_list(const std::vector<int>& ranks) {
  std::string text = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? "," : "") + std::to_string(ranks[i]);
  return text + "]";
}

// The communicator of the members of sub-group `ranks` (`ranks_of` says of
// what, for the message) of `comm`, whose `size` processes include this one
// as rank `me`; empty on processes not listed. Collective over `comm`. The
// list is validated identically everywhere, then the ranks agree, so that a
// bad list fails on every rank instead of leaving some in MPI_Comm_split.
detail::UniqueComm split_members(MPI_Comm comm, int me, int size, const std::vector<int>& ranks,
                                 const std::string& ranks_of, std::chrono::milliseconds timeout) {
  // Blocking collectives (MPI_Allreduce, MPI_Comm_split): watched.
  const detail::BlockingCallWatchdog watchdog("new_group (MPI_Allreduce and MPI_Comm_split over the " + ranks_of + ")",
                                              timeout);
  std::string problem;
  const std::set<int> unique(ranks.begin(), ranks.end());
  if (ranks.empty()) problem = "the rank list is empty";
  if (unique.size() != ranks.size()) problem = "the rank list contains duplicates";
  for (int r : ranks) {
    if (r < 0 || r >= size) problem = "rank " + std::to_string(r) + " is not in 0.." + std::to_string(size - 1);
  }
  // Hash of the list: different lists on different ranks are a bug too.
  const uint64_t hash =
      detail::fnv1a(std::string_view(reinterpret_cast<const char*>(ranks.data()), ranks.size() * sizeof(int)));
  std::array<uint64_t, 2> local{hash, ~hash};
  std::array<uint64_t, 2> reduced{};
  ACCELERATE_MPI_CHECK(MPI_Allreduce(local.data(), reduced.data(), 2, MPI_UINT64_T, MPI_MAX, comm));
  if (problem.empty() && (reduced[0] != hash || reduced[1] != ~hash)) problem = "the ranks passed different lists";
  int bad = problem.empty() ? 0 : 1;
  int any_bad = 0;
  ACCELERATE_MPI_CHECK(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, comm));
  if (any_bad != 0) {
    throw ConfigError(detail::where() + " new_group: " +
                      (problem.empty() ? std::string("another rank rejected the rank list") : problem) +
                      ". Pass the same list of distinct " + ranks_of + " on every process.");
  }
  const auto position = std::find(ranks.begin(), ranks.end(), me);
  const bool member = position != ranks.end();
  detail::UniqueComm members;  // the group holds its own duplicates
  ACCELERATE_MPI_CHECK(MPI_Comm_split(comm, member ? 0 : MPI_UNDEFINED,
                                      member ? static_cast<int>(position - ranks.begin()) : 0, members.out()));
  return members;
}

// Object collectives send a serialised object as one message.
void check_object_size(const std::vector<char>& bytes, const char* what) {
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) {
    throw ConfigError(detail::where() + " " + what + ": a serialised object of " + std::to_string(bytes.size()) +
                      " bytes exceeds the 2 GiB limit of one message; send large tensors with tensor collectives.");
  }
}

}  // namespace

// Members are destroyed in reverse: the board detaches from the communicator
// before it is freed, and it is not freed if a control step timed out on it
// (UniqueComm keeps abandoned communicators).
struct ProcessGroup::Control {
  Control(MPI_Comm comm, std::chrono::milliseconds timeout)
      : owned(detail::duplicate_comm(comm)),
        board(detail::ArrivalBoard::attach(owned.get())),
        deadline(owned.get(), timeout) {}

  detail::UniqueComm owned;
  std::unique_ptr<detail::ArrivalBoard> board;  // names the ranks missing from a control step
  detail::DeadlineComm deadline;                // built after the board is attached, so it finds it
};

ProcessGroup::ProcessGroup(const State& state, CommHandle comm, std::string name, ProcessGroupOptions options,
                           std::unique_ptr<Backend> nccl)
    : name_(std::move(name)), timeout_(options.timeout.value_or(state.timeout())) {
  const EnvConfig env = EnvConfig::from_environment();
  debug_mode_ = options.debug_mode.value_or(env.debug_mode.value_or(false));
  const detail::SharedMemoryPlacement shared{options.shared_memory_all_reduce.value_or(
                                                 env.shared_memory_all_reduce.value_or(true)),
                                             state.node_index()};
  // Duplicating communicators and mapping the node's shared memory are
  // blocking collectives with no deadline of their own: watched.
  const detail::BlockingCallWatchdog watchdog("creating process group '" + name_ +
                                                  "' (MPI_Comm_dup, MPI_Comm_split, the node's shared memory)",
                                              timeout_);
  control_ = std::make_unique<Control>(comm.get(), timeout_);
  rank_ = control_->deadline.rank();
  size_ = control_->deadline.size();
  mpi_ = std::make_unique<detail::MpiBackend>(comm.get(), name_,
                                              detail::TimeoutPolicy{timeout_, options.abort_on_timeout}, shared);
  nccl_ = std::move(nccl);
}

ProcessGroup::ProcessGroup(const State& state, CommHandle comm, std::string name, ProcessGroupOptions options)
    : ProcessGroup(state, comm, std::move(name), options, nullptr) {
#if ACCELERATE_HAVE_NCCL
  // Eagerly and collectively: a communicator created inside the first
  // collective deadlocks when ranks reach different first collectives.
  if (state.device().is_cuda()) {
    // Ranks sharing a GPU: NCCL would refuse the communicator. The group
    // still carries CPU tensors; CUDA tensors get the reason (backend_for).
    if (auto shared = detail::find_shared_gpus(comm.get(), state.device().index(), timeout_)) {
      no_nccl_reason_ = std::move(*shared);
    } else {
      nccl_ = detail::make_nccl_backend(comm.get(), state.device().index(), name_,
                                        detail::TimeoutPolicy{timeout_, options.abort_on_timeout});
    }
  }
#endif
}

ProcessGroup::~ProcessGroup() {
  // NCCL before MPI: its teardown may still need the MPI side alive.
  nccl_.reset();
  mpi_.reset();
  control_.reset();
}

CommHandle ProcessGroup::control_handle() const noexcept { return control_->owned.get(); }

std::unique_ptr<ProcessGroup> ProcessGroup::world(const State& state, ProcessGroupOptions options) {
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(state, state.world_comm(), "world", options));
}

std::unique_ptr<ProcessGroup> ProcessGroup::node(const State& state, ProcessGroupOptions options) {
  return std::unique_ptr<ProcessGroup>(
      new ProcessGroup(state, state.node_comm(), "node " + std::to_string(state.node_index()), options));
}

std::unique_ptr<ProcessGroup> ProcessGroup::cross_node(const State& state, ProcessGroupOptions options) {
  return std::unique_ptr<ProcessGroup>(
      new ProcessGroup(state, state.cross_node_comm(),
                       "cross-node (local rank " + std::to_string(state.local_process_index()) + ")", options));
}

std::unique_ptr<ProcessGroup> ProcessGroup::new_group(const State& state, const std::vector<int>& ranks,
                                                      ProcessGroupOptions options) {
  detail::UniqueComm comm = split_members(state.world_comm(), state.process_index(), state.num_processes(), ranks,
                                          "world ranks", options.timeout.value_or(state.timeout()));
  if (!comm) return nullptr;
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(state, comm.get(), "group" + rank_list(ranks), options));
}

std::unique_ptr<ProcessGroup> ProcessGroup::new_group(const State& state, ProcessGroup& parent,
                                                      const std::vector<int>& ranks, ProcessGroupOptions options) {
  detail::UniqueComm comm = split_members(parent.control_comm(), parent.rank_, parent.size_, ranks,
                                          "ranks of group '" + parent.name_ + "'", parent.timeout_);
  std::string name = "group" + rank_list(ranks) + " of " + parent.name_;
  if (!parent.nccl_) {
    if (!comm) return nullptr;
    return std::unique_ptr<ProcessGroup>(new ProcessGroup(state, comm.get(), std::move(name), options));
  }
#if ACCELERATE_HAVE_NCCL
  // Collective over the parent, members or not (ncclCommSplit needs them all).
  std::unique_ptr<Backend> nccl =
      detail::split_nccl_backend(*parent.nccl_, parent.control_comm(), comm ? comm.get() : MPI_COMM_NULL, name,
                                 detail::TimeoutPolicy{options.timeout.value_or(state.timeout()),
                                                       options.abort_on_timeout});
  if (!comm) return nullptr;
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(state, comm.get(), std::move(name), options, std::move(nccl)));
#else
  return nullptr;  // unreachable: without NCCL no group has an NCCL backend
#endif
}

Backend& ProcessGroup::backend_for(const c10::Device& device) {
  if (device.is_cpu()) return *mpi_;
  if (device.is_cuda()) {
    if (!config::has_nccl) {
      detail::throw_feature_not_built("NCCL", "a collective on a CUDA tensor", "ACCELERATE_WITH_NCCL");
    }
    if (!nccl_ && !no_nccl_reason_.empty()) {
      throw ConfigError(detail::where() + " group '" + name_ + "': " + no_nccl_reason_);
    }
    if (!nccl_) {
      throw ConfigError(detail::where() + " group '" + name_ +
                        "': got a CUDA tensor, but the group was created "
                        "for the CPU (the State's device is cpu: no GPU visible, or cpu=true). Move the tensor "
                        "to the CPU or run with GPUs.");
    }
    return *nccl_;
  }
  throw ConfigError(detail::where() + " group '" + name_ + "': no backend carries tensors on " + device.str() +
                    "; use CPU or CUDA tensors.");
}

void ProcessGroup::verify(const char* operation, const at::Tensor* tensor, int root, ShapeRule rule) {
  if (!debug_mode_) return;
  detail::verify_collective(control_comm(), name_, operation, tensor, root, rule, timeout_);
}

// --- asynchronous ------------------------------------------------------------

std::string ProcessGroup::cpu_all_reduce_algorithm() const { return mpi_->all_reduce_algorithm(); }

at::Tensor ProcessGroup::all_reduce_buffer(int64_t numel, const at::TensorOptions& options) {
  if (numel < 0) {
    throw ConfigError(detail::where() + " all_reduce_buffer: " + std::to_string(numel) +
                      " elements asked for; ask for zero or more.");
  }
  if (debug_mode_) {
    // The signature of the buffer asked for (one element's memory: only its
    // dtype, device and shape are compared).
    const at::Tensor signature = at::empty_strided({numel}, {0}, options.requires_grad(false));
    verify("all_reduce_buffer", &signature, 0, ShapeRule::Exact);
  }
  return backend_for(options.device()).make_all_reduce_buffer(numel, options);
}

// Each collective checks its arguments here, once for every backend
// (backend.hpp). The tensor the debug-mode check reads is checked first; the
// debug-mode check runs before the rest, so that a root or shape that differs
// between ranks is reported on every rank rather than on one.

std::unique_ptr<Work> ProcessGroup::all_reduce_async(at::Tensor& tensor, const AllReduceOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::all_reduce_async");
  detail::check_defined(tensor, "all_reduce", "input");
  verify("all_reduce", &tensor, 0, ShapeRule::Exact);
  return backend_for(tensor.device()).all_reduce(tensor, options);
}

std::unique_ptr<Work> ProcessGroup::broadcast_async(at::Tensor& tensor, const BroadcastOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::broadcast_async");
  detail::check_defined(tensor, "broadcast", "input");
  verify("broadcast", &tensor, options.root, ShapeRule::Exact);
  detail::check_root(options.root, size_, name_, "broadcast");
  return backend_for(tensor.device()).broadcast(tensor, options);
}

std::unique_ptr<Work> ProcessGroup::all_gather_async(at::Tensor& output, const at::Tensor& input,
                                                     const AllGatherOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::all_gather_async");
  detail::check_defined(input, "all_gather", "input");
  verify("all_gather", &input, 0, ShapeRule::Exact);
  detail::check_pair(output, input, "all_gather");
  detail::check_numel(output, input.numel() * size_, "all_gather", "output", "group size × input elements");
  return backend_for(input.device()).all_gather(output, input, options);
}

std::unique_ptr<Work> ProcessGroup::gather_async(at::Tensor& output, const at::Tensor& input,
                                                 const GatherOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::gather_async");
  detail::check_defined(input, "gather", "input");
  verify("gather", &input, options.root, ShapeRule::Exact);
  detail::check_root(options.root, size_, name_, "gather");
  if (rank_ == options.root) {  // the output exists on the root only
    detail::check_pair(output, input, "gather");
    detail::check_numel(output, input.numel() * size_, "gather", "output", "group size × input elements");
  }
  return backend_for(input.device()).gather(output, input, options);
}

std::unique_ptr<Work> ProcessGroup::scatter_async(at::Tensor& output, const at::Tensor& input,
                                                  const ScatterOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::scatter_async");
  detail::check_defined(output, "scatter", "output");
  verify("scatter", &output, options.root, ShapeRule::Exact);
  detail::check_root(options.root, size_, name_, "scatter");
  if (rank_ == options.root) {  // the input exists on the root only
    detail::check_pair(output, input, "scatter");
    detail::check_numel(input, output.numel() * size_, "scatter", "input", "group size × output elements");
  }
  return backend_for(output.device()).scatter(output, input, options);
}

std::unique_ptr<Work> ProcessGroup::reduce_scatter_async(at::Tensor& output, const at::Tensor& input,
                                                         const ReduceScatterOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::reduce_scatter_async");
  detail::check_defined(input, "reduce_scatter", "input");
  verify("reduce_scatter", &input, 0, ShapeRule::Exact);
  detail::check_pair(output, input, "reduce_scatter");
  detail::check_numel(input, output.numel() * size_, "reduce_scatter", "input", "group size × output elements");
  return backend_for(input.device()).reduce_scatter(output, input, options);
}

std::unique_ptr<Work> ProcessGroup::all_to_all_async(at::Tensor& output, const at::Tensor& input,
                                                     const AllToAllOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::all_to_all_async");
  detail::check_defined(input, "all_to_all", "input");
  verify("all_to_all", &input, 0, ShapeRule::Exact);
  detail::check_pair(output, input, "all_to_all");
  if (input.numel() % size_ != 0) {
    throw ConfigError("all_to_all: the input " + detail::shape_of(input) + " does not split into " +
                      std::to_string(size_) + " equal blocks; its element count must be a multiple of the group size.");
  }
  detail::check_numel(output, input.numel(), "all_to_all", "output", "as many elements as the input");
  return backend_for(input.device()).all_to_all(output, input, options);
}

std::unique_ptr<Work> ProcessGroup::barrier_async(const BarrierOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::barrier_async");
  verify("barrier", nullptr, 0, ShapeRule::Ignore);
  return mpi_->barrier(options);
}

// --- blocking ----------------------------------------------------------------

void ProcessGroup::all_reduce(at::Tensor& tensor, const AllReduceOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::all_reduce");
  detail::check_defined(tensor, "all_reduce", "input");
  verify("all_reduce", &tensor, 0, ShapeRule::Exact);
  backend_for(tensor.device()).all_reduce_blocking(tensor, options);
}

void ProcessGroup::broadcast(at::Tensor& tensor, const BroadcastOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::broadcast");
  broadcast_async(tensor, options)->wait();
}

at::Tensor ProcessGroup::all_gather(const at::Tensor& input, const AllGatherOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::all_gather");
  at::Tensor output = at::empty(stacked_sizes(input, size_), input.options());
  all_gather_async(output, input, options)->wait();
  return output;
}

at::Tensor ProcessGroup::all_gather_varying(const at::Tensor& input, const AllGatherOptions& options) {
  detail::check_defined(input, "all_gather_varying", "input");
  if (input.dim() == 0) {
    throw ConfigError(
        "all_gather_varying: a 0-d tensor has no first dimension to vary; "
        "use all_gather, or reshape to [1].");
  }
  verify("all_gather_varying", &input, 0, ShapeRule::Trailing);
  // Row counts first (over the control communicator), then the payload.
  const std::vector<int64_t> counts = control_->deadline.with_timeout(options.timeout.value_or(timeout_))
                                          .all_gather(int64_t{input.size(0)}, "all_gather_varying (row counts)");
  std::vector<int64_t> sizes(input.sizes().begin(), input.sizes().end());
  sizes[0] = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  at::Tensor output = at::empty(sizes, input.options());
  backend_for(input.device()).all_gather_v(output, input, counts, options)->wait();
  return output;
}

at::Tensor ProcessGroup::gather(const at::Tensor& input, const GatherOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::gather");
  at::Tensor output;
  if (rank_ == options.root) output = at::empty(stacked_sizes(input, size_), input.options());
  gather_async(output, input, options)->wait();
  return output;
}

void ProcessGroup::scatter(at::Tensor& output, const at::Tensor& input, const ScatterOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::scatter");
  scatter_async(output, input, options)->wait();
}

at::Tensor ProcessGroup::reduce_scatter(const at::Tensor& input, const ReduceScatterOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::reduce_scatter");
  at::Tensor output = at::empty(block_sizes(input, size_, "reduce_scatter"), input.options());
  reduce_scatter_async(output, input, options)->wait();
  return output;
}

at::Tensor ProcessGroup::all_to_all(const at::Tensor& input, const AllToAllOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::all_to_all");
  block_sizes(input, size_, "all_to_all");
  at::Tensor output = at::empty(input.sizes(), input.options());
  all_to_all_async(output, input, options)->wait();
  return output;
}

void ProcessGroup::barrier(const BarrierOptions& options) {
  ACCELERATE_PROFILE_RANGE("accelerate::barrier");
  barrier_async(options)->wait();
}

// --- objects -----------------------------------------------------------------

void ProcessGroup::broadcast_object(c10::IValue& object, int root) {
  if (root < 0 || root >= size_) {
    throw ConfigError(detail::where() + " broadcast_object: root " + std::to_string(root) +
                      " is not a rank of group '" + name_ + "'.");
  }
  verify("broadcast_object", nullptr, root, ShapeRule::Ignore);
  std::vector<char> bytes;
  if (rank_ == root) bytes = detail::serialize_object(object);
  int64_t length = static_cast<int64_t>(bytes.size());
  control_->deadline.broadcast(length, root, "broadcast_object (size)");
  bytes.resize(static_cast<std::size_t>(length));
  control_->deadline.broadcast_bytes(bytes.data(), static_cast<int>(length), root, "broadcast_object (payload)");
  if (rank_ != root) object = detail::deserialize_object(bytes);
}

void ProcessGroup::broadcast_object_list(std::vector<c10::IValue>& objects, int root) {
  c10::IValue packed{c10::List<c10::IValue>(c10::AnyType::get())};
  if (rank_ == root) {
    c10::List<c10::IValue> list(c10::AnyType::get());
    for (const auto& object : objects) list.push_back(object);
    packed = c10::IValue(list);
  }
  broadcast_object(packed, root);
  if (rank_ != root) {
    // Receivers take the root's list whole, length included (seeds: the
    // list is updated in place with the root's objects).
    const auto list = packed.toList();
    objects.assign(list.begin(), list.end());
  }
}

std::vector<c10::IValue> ProcessGroup::gather_object(const c10::IValue& object, int root) {
  if (root < 0 || root >= size_) {
    throw ConfigError(detail::where() + " gather_object: root " + std::to_string(root) + " is not a rank of group '" +
                      name_ + "'.");
  }
  verify("gather_object", nullptr, root, ShapeRule::Ignore);
  const std::vector<char> mine = detail::serialize_object(object);
  check_object_size(mine, "gather_object");
  std::vector<c10::IValue> objects;
  for (const auto& bytes : control_->deadline.gather_byte_strings(mine, root, "gather_object")) {
    objects.push_back(detail::deserialize_object(bytes));
  }
  return objects;
}

std::vector<c10::IValue> ProcessGroup::all_gather_object(const c10::IValue& object) {
  verify("all_gather_object", nullptr, 0, ShapeRule::Ignore);
  const std::vector<char> mine = detail::serialize_object(object);
  check_object_size(mine, "all_gather_object");
  std::vector<c10::IValue> objects;
  for (const auto& bytes : control_->deadline.all_gather_byte_strings(mine, "all_gather_object")) {
    objects.push_back(detail::deserialize_object(bytes));
  }
  return objects;
}

}  // namespace accelerate
