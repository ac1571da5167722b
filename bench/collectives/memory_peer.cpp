// The memory-bound floor of an all-reduce on one node, measured in the
// same run as the peers.
//
// An in-place all-reduce must at least read every byte of each rank's
// buffer and write every byte of the result back, on all ranks at once:
// the memory traffic of one memcpy of the buffer per rank. The candidate
// times that (every rank copies its buffer into a scratch buffer at the same
// time) and the report divides its time by ours. Any real algorithm moves
// more: data has to cross between processes too.
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
    return {std::move(copy)};
  }

 private:
  std::vector<std::byte> scratch_;
};

}  // namespace

std::unique_ptr<Peer> make_memory_peer() { return std::make_unique<MemoryPeer>(); }

}  // namespace bench
