// A Peer is one implementation of the collectives: Accelerate-HPC's
// ProcessGroup, raw MPI, or LibTorch's c10d ProcessGroupGloo. For each
// collective it offers one or more Candidates: calls the harness times.
//
// A candidate marked `diagnostic` is not part of the comparison the issue
// asks for; it isolates where a difference comes from (for instance raw
// MPI's non-blocking collective, which our backend uses).
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collective.hpp"

namespace accelerate {
class State;
}

namespace bench {

struct Candidate {
  std::string name;            ///< "accelerate", "mpi", "gloo", "mpi.nonblocking", …
  std::string what;            ///< one line: the call being timed
  bool diagnostic = false;     ///< excluded from the main table and the targets
  std::function<void()> call;  ///< one complete (blocking) operation on the shared buffers
  /// For the correctness check only, when `call` leaves its result elsewhere
  /// than the shared buffers: the same operation, then a copy into them.
  std::function<void()> check_call = nullptr;
  /// A yardstick, not a collective (the copy of the memory floor): never
  /// checked for a result, timed even with --no-diagnostics.
  bool reference = false;
};

class Peer {
 public:
  virtual ~Peer() = default;
  /// "accelerate", "mpi" or "gloo".
  [[nodiscard]] virtual std::string name() const = 0;
  /// Versions and settings of the implementation, for the report.
  [[nodiscard]] virtual std::string describe() const = 0;
  /// The calls to time for `op` on `buffers`; they capture `buffers` by reference.
  virtual std::vector<Candidate> candidates(Collective op, Buffers& buffers) = 0;
};

/// Accelerate-HPC: ProcessGroup::world(state).
std::unique_ptr<Peer> make_accelerate_peer(const accelerate::State& state);
/// Raw MPI on a duplicate of `comm` (blocking collectives, plus diagnostics).
std::unique_ptr<Peer> make_mpi_peer(MPI_Comm comm);
/// One memcpy of the all-reduce buffer per rank, all at once: the
/// memory-bound floor of an all-reduce (memory_peer.cpp).
std::unique_ptr<Peer> make_memory_peer();
/// LibTorch's c10d::ProcessGroupGloo over TCP, bootstrapped with a FileStore
/// whose path travels over `comm`. Collective over `comm`. Returns nullptr
/// and sets `why_not` when the benchmark was built without it.
std::unique_ptr<Peer> make_gloo_peer(MPI_Comm comm, std::string& why_not);

}  // namespace bench
