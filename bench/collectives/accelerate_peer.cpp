// Accelerate-HPC's ProcessGroup as the implementation under test.
//
// all_reduce and broadcast use the blocking calls a training loop makes.
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
  explicit AcceleratePeer(const accelerate::State& state) : group_(accelerate::ProcessGroup::world(state)) {}

  [[nodiscard]] std::string name() const override { return "accelerate"; }

  [[nodiscard]] std::string describe() const override {
    return "Accelerate-HPC ProcessGroup::world(state), group '" + group_->name() + "' (CPU tensors: MPI backend), " +
           "debug_mode " + (group_->debug_mode() ? "on" : "off");
  }

  std::vector<Candidate> candidates(Collective op, Buffers& buffers) override {
    accelerate::ProcessGroup& group = *group_;
    switch (op) {
      case Collective::AllReduce:
        return {{"accelerate", "group.all_reduce(t)", false, [&group, &buffers] { group.all_reduce(buffers.data); }}};
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
};

}  // namespace

std::unique_ptr<Peer> make_accelerate_peer(const accelerate::State& state) {
  return std::make_unique<AcceleratePeer>(state);
}

}  // namespace bench
