// ProcessGroup: the collectives of a set of ranks, routed by tensor device.
//
// CPU tensors travel over MPI (MpiBackend), CUDA tensors over NCCL
// (NcclBackend, created eagerly with the group when the State's device is a
// GPU). Every operation exists in two forms:
//
//   group.all_reduce(t);                       // blocking, returns when done
//   auto work = group.all_reduce_async(t);     // posted; overlap, then
//   work->wait();                              // complete (rethrows errors)
//
// Object collectives (broadcast_object, gather_object, all_gather_object)
// serialise c10::IValue trees with LibTorch's pickler and always travel
// over MPI, whatever the device of tensors inside them.
//
// Safety nets: every blocking wait has a deadline (ProcessGroupOptions::
// timeout); on expiry the ranks that never arrived are named and the job is
// aborted. With ACCELERATE_DEBUG_MODE=1 each collective first compares the
// ranks' shapes and dtypes and raises CollectiveMismatch on every rank.
//
// control_comm() returns an MPI_Comm: it needs accelerate/runtime/mpi_comm.hpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/comm/backend.hpp"
#include "accelerate/comm/types.hpp"
#include "accelerate/comm/work.hpp"
#include "accelerate/runtime/comm_handle.hpp"
#include "accelerate/runtime/lifetime.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate {
namespace detail {
enum class ShapeRule : int;  // what the debug-mode check compares (comm/debug_check.hpp)
}  // namespace detail

struct ProcessGroupOptions {
  /// Deadline of every collective; unset takes the State's (ACCELERATE_TIMEOUT, default 1800 s).
  std::optional<std::chrono::milliseconds> timeout;
  /// After a timeout has been reported: MPI_Abort the job (true), or throw
  /// TimeoutError and leave the group unusable (false; for tests and tools).
  bool abort_on_timeout = true;
  /// Cross-rank shape/dtype checks before each collective; unset follows ACCELERATE_DEBUG_MODE.
  std::optional<bool> debug_mode;
  /// CPU all_reduce through each node's shared memory (hierarchical across
  /// nodes) rather than MPI's algorithm; unset follows ACCELERATE_SHM_ALLREDUCE
  /// (default on). Used where every node holds two or more of the group's ranks, the same number on each.
  /// reduce_scatter and all_gather take it too where the whole group is on one node.
  std::optional<bool> shared_memory_all_reduce;
};

class ProcessGroup {
 public:
  /// All processes of `state` (collective over state.world_comm()).
  static std::unique_ptr<ProcessGroup> world(const State& state, ProcessGroupOptions options = {});
  /// The processes of this node (collective over the world).
  static std::unique_ptr<ProcessGroup> node(const State& state, ProcessGroupOptions options = {});
  /// One process per node: those sharing this process's local rank.
  static std::unique_ptr<ProcessGroup> cross_node(const State& state, ProcessGroupOptions options = {});
  /// The listed world ranks, in that order (rank i of the group is ranks[i]).
  /// Collective over the world; returns nullptr on ranks not listed. Bad
  /// lists (duplicates, out of range, different on different ranks) raise
  /// ConfigError on every rank.
  static std::unique_ptr<ProcessGroup> new_group(const State& state, const std::vector<int>& ranks,
                                                 ProcessGroupOptions options = {});
  /// The listed ranks of `parent`, in that order (rank i of the new group is
  /// rank ranks[i] of `parent`). Collective over `parent`; returns nullptr on
  /// ranks not listed, and bad lists raise ConfigError on every rank of it.
  /// Where `parent` carries CUDA tensors, the new group's NCCL communicator
  /// is split from the parent's (ncclCommSplit, NCCL 2.18 and newer, at
  /// compile and at run time), otherwise bootstrapped over MPI among the
  /// members, as the new_group above always does (it has no parent NCCL
  /// communicator to split).
  static std::unique_ptr<ProcessGroup> new_group(const State& state, ProcessGroup& parent,
                                                 const std::vector<int>& ranks, ProcessGroupOptions options = {});

  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] bool debug_mode() const noexcept { return debug_mode_; }
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  /// How all_reduce of CPU tensors runs here: "shared memory (2 ranks per
  /// node × 2 nodes)" or "mpi" (ProcessGroupOptions::shared_memory_all_reduce).
  [[nodiscard]] std::string cpu_all_reduce_algorithm() const;
  /// The backend that carries tensors on `device` ("mpi" or "nccl");
  /// FeatureNotBuilt / ConfigError when there is none.
  Backend& backend_for(const c10::Device& device);

  /// A zeroed 1-D tensor of `numel` elements on `options.device()`, for
  /// memory that is all-reduced again and again (gradient buckets). On the
  /// CPU, where all_reduce goes through the node's shared memory and the
  /// tensor is above 64 KiB, it lies in a segment the node's ranks all map,
  /// and an all_reduce of the whole tensor on every rank reduces from each
  /// rank's copy where it lies: no copy into the shared slots. Elsewhere
  /// (and at 64 KiB or less, where one synchronisation and a copy is as
  /// fast) it is ordinary memory. Collective:
  /// every rank asks for the same size and dtype, in the same order, and
  /// all-reduces the whole tensor (a part of it, or a different tensor on
  /// some rank, takes the ordinary path, which the others must take too).
  at::Tensor all_reduce_buffer(int64_t numel, const at::TensorOptions& options);

  // --- asynchronous ---------------------------------------------------------
  std::unique_ptr<Work> all_reduce_async(at::Tensor& tensor, const AllReduceOptions& options = {});
  std::unique_ptr<Work> broadcast_async(at::Tensor& tensor, const BroadcastOptions& options = {});
  std::unique_ptr<Work> all_gather_async(at::Tensor& output, const at::Tensor& input,
                                         const AllGatherOptions& options = {});
  std::unique_ptr<Work> gather_async(at::Tensor& output, const at::Tensor& input, const GatherOptions& options = {});
  std::unique_ptr<Work> scatter_async(at::Tensor& output, const at::Tensor& input, const ScatterOptions& options = {});
  std::unique_ptr<Work> reduce_scatter_async(at::Tensor& output, const at::Tensor& input,
                                             const ReduceScatterOptions& options = {});
  std::unique_ptr<Work> all_to_all_async(at::Tensor& output, const at::Tensor& input,
                                         const AllToAllOptions& options = {});
  std::unique_ptr<Work> barrier_async(const BarrierOptions& options = {});

  // --- blocking -------------------------------------------------------------
  /// In place.
  void all_reduce(at::Tensor& tensor, const AllReduceOptions& options = {});
  /// In place: `tensor` on the root is sent, elsewhere overwritten (same shape and dtype).
  void broadcast(at::Tensor& tensor, const BroadcastOptions& options = {});
  /// [k, …] on every rank -> [size*k, …] (rank order).
  at::Tensor all_gather(const at::Tensor& input, const AllGatherOptions& options = {});
  /// [k_r, …] with k_r varying by rank -> [Σ k_r, …] (rank order). Trailing
  /// dimensions and dtype must agree. The row counts are exchanged first.
  at::Tensor all_gather_varying(const at::Tensor& input, const AllGatherOptions& options = {});
  /// [k, …] -> [size*k, …] on the root; an undefined tensor elsewhere.
  at::Tensor gather(const at::Tensor& input, const GatherOptions& options = {});
  /// Root's [size*k, …] -> [k, …] everywhere; `output` gives shape and dtype.
  void scatter(at::Tensor& output, const at::Tensor& input, const ScatterOptions& options = {});
  /// [size*k, …] -> this rank's reduced [k, …] block.
  at::Tensor reduce_scatter(const at::Tensor& input, const ReduceScatterOptions& options = {});
  /// [size*k, …]: block r goes to rank r; returns the received blocks in rank order.
  at::Tensor all_to_all(const at::Tensor& input, const AllToAllOptions& options = {});
  void barrier(const BarrierOptions& options = {});

  // --- objects (seeds: broadcast_object_list, gather_object) ----------------
  /// Replaces `object` with the root's.
  void broadcast_object(c10::IValue& object, int root = 0);
  /// `objects` replaced by the root's list, length included (seeds' broadcast_object_list).
  void broadcast_object_list(std::vector<c10::IValue>& objects, int root = 0);
  /// The objects of all ranks, in rank order, on the root; empty elsewhere.
  std::vector<c10::IValue> gather_object(const c10::IValue& object, int root = 0);
  /// The objects of all ranks, in rank order, everywhere.
  std::vector<c10::IValue> all_gather_object(const c10::IValue& object);

  /// The MPI communicator of the group's control traffic (objects, checks),
  /// as MPI_Comm (needs accelerate/runtime/mpi_comm.hpp).
  template <class Mpi = detail::MpiComm>
  [[nodiscard]] typename Mpi::Comm control_comm() const noexcept {
    return control_handle().get<Mpi>();
  }
  /// Ends with this group: models prepared on it stop with an Error after it is gone.
  [[nodiscard]] const Lifetime& lifetime() const noexcept { return lifetime_; }

 private:
  ProcessGroup(const State& state, CommHandle comm, std::string name, ProcessGroupOptions options);
  /// Adopts `nccl` (possibly nullptr) instead of creating the NCCL backend.
  ProcessGroup(const State& state, CommHandle comm, std::string name, ProcessGroupOptions options,
               std::unique_ptr<Backend> nccl);
  [[nodiscard]] CommHandle control_handle() const noexcept;
  void verify(const char* operation, const at::Tensor* tensor, int root, detail::ShapeRule rule);

  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  bool debug_mode_ = false;
  std::chrono::milliseconds timeout_;
  // The control communicator (objects, checks, row counts), its arrival
  // board and the DeadlineComm over them (process_group.cpp).
  struct Control;
  std::unique_ptr<Control> control_;
  std::unique_ptr<Backend> mpi_;
  std::unique_ptr<Backend> nccl_;
  std::string no_nccl_reason_;  // why a CUDA device's group has no NCCL (ranks share a GPU)
  Lifetime lifetime_{"the ProcessGroup"};
};

}  // namespace accelerate
