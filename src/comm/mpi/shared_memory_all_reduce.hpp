// SharedMemoryAllReduce: the CPU all-reduce of ranks that share a node,
// through one shared-memory segment per communicator instead of messages.
//
// Each rank owns two slots of the segment. Per chunk of the tensor, every
// rank copies its data into its slot, reduces the 1/n slice of the chunk it
// owns from every rank's slot (a reduce-scatter without messages), and then
// copies every rank's reduced slice out (an all-gather). The slots alternate
// between chunks, so a rank may fill the next chunk while others still copy
// the last one out. Ranks synchronise through one counter per rank in the
// segment; every wait has the operation's deadline.
//
// Across nodes it is hierarchical: before a reduced slice is published, MPI
// all-reduces it among the ranks that own the same slice on every node, so
// only 1/n of the data crosses the network per rank. That needs the same
// number of ranks on every node; otherwise, and with one rank per node,
// create() returns nullptr and the caller keeps MPI's algorithm.
//
// reduce_scatter() and all_gather() use the same slots on one node, as the
// two halves of the all-reduce (ZeRO stage 2's gradients and parameters).
//
// make_buffer() goes one copy further: a tensor in a segment of its own
// that every rank of the node maps, so that its all-reduce reads the other
// ranks' data where they wrote it (gradient buckets: the backward pass
// writes them there) and skips the copy into the slots.
//
// The segment is POSIX shared memory, unlinked as soon as every rank of the
// node has mapped it: nothing is left behind if the job dies, and releasing
// it is local (no collective in a destructor).
#pragma once

#include <ATen/core/Tensor.h>
#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "accelerate/comm/types.hpp"
#include "detail/mpi_wait.hpp"
#include "detail/unique_comm.hpp"

namespace accelerate::detail {

struct NodeBuffer;  // a tensor's memory from make_buffer() (the .cpp file)

class SharedMemoryAllReduce {
 public:
  /// Bytes of one slot: the chunk of the tensor reduced per round. Measured
  /// on 2 ranks from 256 KiB to 2 MiB (docs/performance.md): 1 MiB keeps a
  /// chunk's three copies in cache and needs few rounds.
  static constexpr std::size_t kChunkBytes = std::size_t{1024} * 1024;
  /// Up to this size every rank reduces the whole message from all slots:
  /// one synchronisation per call instead of two, for a little redundant
  /// arithmetic.
  static constexpr std::size_t kWholeMessageBytes = std::size_t{64} * 1024;

  /// Collective over `comm`. Ranks with the same `node` (State::node_index,
  /// which may be a virtual node of a host) share a segment. Returns nullptr
  /// on every rank where the segment cannot help or cannot be made.
  static std::unique_ptr<SharedMemoryAllReduce> create(MPI_Comm comm, int node);

  ~SharedMemoryAllReduce();
  SharedMemoryAllReduce(const SharedMemoryAllReduce&) = delete;
  SharedMemoryAllReduce& operator=(const SharedMemoryAllReduce&) = delete;

  /// How run() waits for the other ranks.
  struct Waiting {
    std::chrono::steady_clock::time_point deadline;
    std::function<void()> while_waiting_long;  ///< e.g. answer arrival queries
  };
  /// What run() ended with. After a timeout the segment is out of step for
  /// good: usable() turns false.
  struct Outcome {
    bool completed = true;
    std::string missing;  ///< on timeout: the group ranks that never arrived
  };

  /// All-reduces `tensor` (contiguous, CPU) in place. `type` and `mpi_op`
  /// are MPI's names for its dtype and `op` (for the step across nodes);
  /// Avg divides by the communicator's size. Needs usable(). A tensor that
  /// is a whole buffer of make_buffer() on every rank is reduced where it
  /// lies, without the slots.
  Outcome run(at::Tensor& tensor, ReduceOp op, MPI_Datatype type, MPI_Op mpi_op, const Waiting& waiting);

  /// Reduce-scatters `input` (contiguous, n × output.numel() elements) into
  /// `output` (contiguous): rank r receives the reduction of every rank's
  /// r-th block. One synchronisation per chunk and no copy-out: each rank
  /// reduces its own block straight from the other ranks' slots. Needs one
  /// node (node_count() == 1) and usable().
  Outcome reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp op, const Waiting& waiting);

  /// All-gathers `input` (contiguous) into `output` (contiguous, n ×
  /// input.numel() elements, rank r's block r-th). Per chunk, each rank
  /// copies its block into its slot once and every rank copies every slot
  /// out: one copy in and n out, against MPI's copies through its fifos.
  /// Needs one node (node_count() == 1) and usable().
  Outcome all_gather(at::Tensor& output, const at::Tensor& input, const Waiting& waiting);

  /// A zeroed 1-D tensor of `numel` elements whose memory is this rank's
  /// part of a new segment the node's ranks all map (placed on this rank's
  /// NUMA node: each rank allocates its own part). Its all_reduce through run() reduces
  /// straight from every rank's copy. Collective over the group: every rank
  /// asks for the same size, in the same order. An undefined tensor on every
  /// rank where any rank could not make its segment (/dev/shm too small).
  at::Tensor make_buffer(int64_t numel, const at::TensorOptions& options);

  [[nodiscard]] bool usable() const { return !broken_; }
  /// How many run() calls reduced a buffer where it lies (for tests).
  [[nodiscard]] uint64_t reduced_in_buffers() const { return reduced_in_buffers_; }
  [[nodiscard]] int node_size() const { return local_size_; }
  [[nodiscard]] int node_count() const { return node_count_; }

 private:
  SharedMemoryAllReduce() = default;

  /// Raises this rank's counter, then waits until every rank of the node
  /// has raised its own as far.
  bool synchronise(const Waiting& waiting, std::string& missing);
  /// Reduces this rank's slice of the chunk into its slot, across nodes too.
  bool reduce_slice(std::byte* chunk, int64_t begin, int64_t end, const at::TensorOptions& options, ReduceOp op,
                    MPI_Datatype type, MPI_Op mpi_op, const Waiting& waiting);
  /// `block` elements in rounds of `width`, one slot per rank each:
  /// fill(offset, count) copies this rank's part of the round into its slot,
  /// the node synchronises, then use(offset, count) reads the slots. The next
  /// round writes the other slot, and the one after waits in its own
  /// synchronisation for every reader of this one.
  Outcome in_rounds(int64_t block, int64_t width, const Waiting& waiting,
                    const std::function<void(int64_t, int64_t)>& fill,
                    const std::function<void(int64_t, int64_t)>& use);
  /// A message of at most kWholeMessageBytes, in one round.
  bool reduce_whole(at::Tensor& tensor, ReduceOp op, MPI_Datatype type, MPI_Op mpi_op, const Waiting& waiting,
                    std::string& missing);
  /// run() of a whole buffer from make_buffer(): reduce this rank's slice
  /// from every rank's buffer, publish, copy the other slices.
  Outcome reduce_in_buffers(const NodeBuffer& buffer, const at::Tensor& tensor, ReduceOp op, MPI_Datatype type,
                            MPI_Op mpi_op, const Waiting& waiting);
  /// The buffer of make_buffer() that `tensor` is the whole of, made by
  /// this object and above kWholeMessageBytes; nullptr otherwise.
  [[nodiscard]] const NodeBuffer* whole_buffer(const at::Tensor& tensor) const;
  /// run() without what follows a request that timed out.
  Outcome run_steps(at::Tensor& tensor, ReduceOp op, MPI_Datatype type, MPI_Op mpi_op, const Waiting& waiting);
  /// MPI's all-reduce of `count` elements at `data` among the nodes. On
  /// timeout the request stays pending: request_pending_.
  bool reduce_across_nodes(void* data, int64_t count, MPI_Datatype type, MPI_Op mpi_op, const Waiting& waiting);
  [[nodiscard]] std::byte* slot(int local_rank, uint64_t round) const;
  [[nodiscard]] uint64_t& counter(int local_rank) const;

  MPI_Comm group_ = MPI_COMM_NULL;  // the whole group (owned by the caller)
  uint64_t id_ = 0;                 // tells this object's buffers from others'
  UniqueComm node_;                 // ranks of this node
  UniqueComm cross_;                // ranks with this local rank on every node
  std::vector<int> group_rank_;     // group rank of each local rank
  int local_rank_ = 0;
  int local_size_ = 1;
  int node_count_ = 1;
  int group_size_ = 1;
  void* mapping_ = nullptr;
  std::size_t mapping_bytes_ = 0;
  uint64_t steps_ = 0;       // synchronisations so far (the counters' common value)
  uint64_t entry_step_ = 0;  // steps_ when the running operation began
  uint64_t rounds_ = 0;      // chunks reduced so far (which slot is next)
  uint64_t reduced_in_buffers_ = 0;
  bool broken_ = false;
  bool request_pending_ = false;          // an MPI request that timed out may still write into our memory
  unsigned spins_ = PollBackoff::kSpins;  // 1 where the node's ranks outnumber its cores
};

}  // namespace accelerate::detail
