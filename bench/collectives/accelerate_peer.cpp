// Accelerate-HPC's ProcessGroup as the implementation under test.
//
// all_reduce and broadcast use the blocking calls a training loop makes;
// all_reduce through MPI's algorithm (the shared-memory path switched off)
// is a diagnostic, and so is the all_reduce of a group.all_reduce_buffer()
// (what gradient buckets are), which reduces where the data lies.
// all_gather is timed into a preallocated output (all_gather_async(out, in)
// then wait()), the form raw MPI and Gloo are timed in; the allocating
// convenience form `all_gather(input)` is a diagnostic, because it adds a
// fresh n·S-byte allocation (page faults) to every call.
#include <accelerate/comm/process_group.hpp>
#include <accelerate/runtime/state.hpp>

#include "peer.hpp"

namespace bench {
namespace {

class AcceleratePeer final : public Peer {
 public:
  explicit AcceleratePeer(const accelerate::State& state)
      : group_(accelerate::ProcessGroup::world(state)),
        mpi_group_(accelerate::ProcessGroup::world(state, {.shared_memory_all_reduce = false})) {}

  [[nodiscard]] std::string name() const override { return "accelerate"; }

  [[nodiscard]] std::string describe() const override {
    return "Accelerate-HPC ProcessGroup::world(state), group '" + group_->name() + "' (CPU tensors: MPI backend), " +
           "debug_mode " + (group_->debug_mode() ? "on" : "off") +
           ", CPU all_reduce: " + group_->cpu_all_reduce_algorithm();
  }

  std::vector<Candidate> candidates(Collective op, Buffers& buffers) override {
    accelerate::ProcessGroup& group = *group_;
    switch (op) {
      case Collective::AllReduce: {
        accelerate::ProcessGroup& mpi_group = *mpi_group_;
        // Collective: every rank builds its candidates in the same order.
        at::Tensor shared = group.all_reduce_buffer(buffers.data.numel(), buffers.data.options());
        return {{"accelerate", "group.all_reduce(t)", false, [&group, &buffers] { group.all_reduce(buffers.data); }},
                {"accelerate.mpi", "group.all_reduce(t) with shared_memory_all_reduce = false (MPI's algorithm)", true,
                 [&mpi_group, &buffers] { mpi_group.all_reduce(buffers.data); }},
                {"accelerate.buffer", "group.all_reduce(b), b = group.all_reduce_buffer(n) (a gradient bucket)", true,
                 [&group, shared]() mutable { group.all_reduce(shared); },
                 [&group, &buffers, shared]() mutable {
                   shared.copy_(buffers.data);
                   group.all_reduce(shared);
                   buffers.data.copy_(shared);
                 }}};
      }
      case Collective::Broadcast: {
        accelerate::BroadcastOptions options;
        options.root = 0;
        return {{"accelerate", "group.broadcast(t, {.root = 0})", false,
                 [&group, &buffers, options] { group.broadcast(buffers.data, options); }}};
      }
      case Collective::AllGather:
        return {{"accelerate", "group.all_gather_async(out, in)->wait()", false,
                 [&group, &buffers] { group.all_gather_async(buffers.output, buffers.input)->wait(); }},
                {"accelerate.alloc", "out = group.all_gather(in) (allocates the output)", true,
                 [&group, &buffers] { (void)group.all_gather(buffers.input); },
                 [&group, &buffers] { buffers.output.copy_(group.all_gather(buffers.input)); }}};
    }
    return {};
  }

 private:
  std::unique_ptr<accelerate::ProcessGroup> group_;
  std::unique_ptr<accelerate::ProcessGroup> mpi_group_;
};

}  // namespace

std::unique_ptr<Peer> make_accelerate_peer(const accelerate::State& state) {
  return std::make_unique<AcceleratePeer>(state);
}

}  // namespace bench
