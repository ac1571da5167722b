// The memory-bound floor of an all-reduce on one node, measured in the
// same run as the peers.
//
// An in-place all-reduce must at least read every byte of each rank's
// buffer and write every byte of the result back, on all ranks at once:
// the memory traffic of one memcpy of the buffer per rank. The candidate
// times that (every rank copies its buffer into a scratch buffer at the same
// time) and the report divides its time by ours. Any real algorithm moves
// more: data has to cross between processes too.
//
// While the buffers fit in cache that floor is a copy within one core's
// cache, which no all-reduce can approach. `copy.cross` (a diagnostic)
// times the least an all-reduce must move between cores instead: every rank
// writes its buffer into its part of a segment the node's ranks share, the
// ranks synchronise, and every rank copies its neighbour's part (lines the
// neighbour has just written, so they cross between cores) into a scratch.
// A 2-rank all-reduce reads the other rank's data across cores at least
// once per byte (half to reduce, half of the result) and writes every byte.
#include <mpi.h>

#include <cstring>
#include <vector>

#include "peer.hpp"

namespace bench {
namespace {

class MemoryPeer final : public Peer {
 public:
  [[nodiscard]] std::string name() const override { return "memory"; }

  [[nodiscard]] std::string describe() const override {
    return "memcpy of the buffer into a scratch buffer, on every rank at once: the memory traffic an in-place "
           "all-reduce cannot avoid (read every byte, write every byte), its memory-bound floor";
  }

  std::vector<Candidate> candidates(Collective op, Buffers& buffers) override {
    if (op != Collective::AllReduce) return {};
    scratch_.assign(static_cast<std::size_t>(buffers.data.nbytes()), std::byte{1});  // faulted in now
    Candidate copy{"copy", "memcpy(scratch, t, size) on every rank at once", false,
                   [this, &buffers] { std::memcpy(scratch_.data(), buffers.data.data_ptr(), scratch_.size()); }};
    copy.reference = true;
    std::vector<Candidate> result{std::move(copy)};
    if (share(scratch_.size())) {
      Candidate cross{"copy.cross",
                      "memcpy(my part, t, size); barrier; memcpy(scratch, neighbour's part, size); barrier: the "
                      "cross-core floor",
                      true, [this, &buffers] {
                        std::memcpy(mine_, buffers.data.data_ptr(), scratch_.size());
                        MPI_Barrier(node_);
                        std::memcpy(scratch_.data(), neighbour_, scratch_.size());
                        MPI_Barrier(node_);
                      }};
      cross.reference = true;
      result.push_back(std::move(cross));
    }
    return result;
  }

  explicit MemoryPeer(MPI_Comm comm) {
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_);
    MPI_Comm_size(node_, &node_size_);
  }
  MemoryPeer(const MemoryPeer&) = delete;
  MemoryPeer& operator=(const MemoryPeer&) = delete;
  ~MemoryPeer() override {
    if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
    MPI_Comm_free(&node_);
  }

 private:
  // A new segment of `bytes` per rank of the node (collective over the node,
  // in the same order on every rank); false on a node of one rank.
  bool share(std::size_t bytes) {
    if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
    if (node_size_ < 2) return false;
    void* base = nullptr;
    MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), 1, MPI_INFO_NULL, node_, &base, &window_);
    mine_ = static_cast<std::byte*>(base);
    int rank = 0;
    MPI_Comm_rank(node_, &rank);
    MPI_Aint size = 0;
    int unit = 0;
    void* theirs = nullptr;
    MPI_Win_shared_query(window_, (rank + 1) % node_size_, &size, &unit, &theirs);
    neighbour_ = static_cast<const std::byte*>(theirs);
    std::memset(mine_, 1, bytes);  // faulted in by its owner, on its NUMA node
    MPI_Barrier(node_);
    return true;
  }

  std::vector<std::byte> scratch_;
  MPI_Comm node_ = MPI_COMM_NULL;
  int node_size_ = 1;
  MPI_Win window_ = MPI_WIN_NULL;
  std::byte* mine_ = nullptr;
  const std::byte* neighbour_ = nullptr;
};

}  // namespace

std::unique_ptr<Peer> make_memory_peer(MPI_Comm comm) { return std::make_unique<MemoryPeer>(comm); }

}  // namespace bench
