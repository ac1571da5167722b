// MpiBackend: collectives on CPU tensors over a private duplicate of an MPI
// communicator, each posted as a non-blocking MPI call behind an MpiWork.
//
// Contiguous tensors are handed to MPI in place (no copy). A non-contiguous
// input is packed into a contiguous temporary first; a non-contiguous
// output is received into a temporary and copied back by the epilogue.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "accelerate/comm/backend.hpp"
#include "detail/arrival_board.hpp"
#include "detail/unique_comm.hpp"
#include "comm/mpi/mpi_types.hpp"
#include "comm/mpi/shared_memory_all_reduce.hpp"
#include "comm/mpi/mpi_work.hpp"

namespace accelerate::detail {

/// Whether all_reduce may go through a node's shared memory
/// (shared_memory_all_reduce.hpp), and which node this process is on
/// (State::node_index: a host, or a virtual node of one).
struct SharedMemoryPlacement {
  bool enabled = false;
  int node = 0;
};

class MpiBackend final : public Backend {
 public:
  /// Below this size a blocking all_reduce checks arrival with a barrier
  /// (deadline, missing ranks named) and then runs MPI's blocking
  /// MPI_Allreduce: for small messages that is several times faster than
  /// the non-blocking call. From this size on the barrier would cost more
  /// than it saves, and the non-blocking call is used as for async work,
  /// unless its algorithm could not be tuned (see mpi_tuning.hpp). Where the
  /// ranks share memory, all_reduce of every size takes that path instead.
  static constexpr int64_t kBlockingAllReduceBytes = 64 * 1024;

  /// Duplicates `comm` (collective over it). `group` names it in messages.
  MpiBackend(MPI_Comm comm, std::string group, TimeoutPolicy policy, SharedMemoryPlacement shared = {});
  ~MpiBackend() override;

  [[nodiscard]] std::string_view name() const override { return "mpi"; }
  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] MPI_Comm comm() const { return comm_.get(); }
  /// "shared memory (k ranks per node × m nodes)" or "mpi".
  [[nodiscard]] std::string all_reduce_algorithm() const override;

  std::unique_ptr<Work> all_reduce(at::Tensor& tensor, const AllReduceOptions& options) override;
  void all_reduce_blocking(at::Tensor& tensor, const AllReduceOptions& options) override;
  /// In the node's shared memory where all_reduce goes through it.
  at::Tensor make_all_reduce_buffer(int64_t numel, const at::TensorOptions& options) override;
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
  std::unique_ptr<Work> post(OperationLabel label, MPI_Request request, int64_t sequence,
                             std::vector<at::Tensor> keep_alive, std::function<void()> epilogue,
                             const Timeout& timeout);
  /// all_reduce of a contiguous CPU tensor through shared memory, under the
  /// same deadline and report as every other collective.
  void shared_memory_all_reduce(at::Tensor& data, const at::Tensor& original, const AllReduceOptions& options);
  /// Runs `collective` on the node's shared memory (one node, usable) under
  /// the deadline and arrival board every collective has; completed work.
  std::unique_ptr<Work> on_shared_memory(
      const OperationLabel& label, const Timeout& timeout,
      const std::function<SharedMemoryAllReduce::Outcome(const SharedMemoryAllReduce::Waiting&)>& collective);

  UniqueComm comm_;
  std::string group_;
  TimeoutPolicy policy_;
  int rank_ = 0;
  int size_ = 1;
  MpiTypeTable types_;
  std::unique_ptr<ArrivalBoard> board_;
  bool nonblocking_allreduce_tuned_ = false;
  std::unique_ptr<SharedMemoryAllReduce> shared_;  // null: MPI's all-reduce
};

}  // namespace accelerate::detail
