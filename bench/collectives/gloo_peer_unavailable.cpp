// Stands in for gloo_peer.cpp when the benchmark is built without c10d Gloo
// (CMake found no Gloo headers, or LibTorch lacks ProcessGroupGloo).
#include "peer.hpp"

#ifndef ACCELERATE_BENCH_GLOO_MISSING
#define ACCELERATE_BENCH_GLOO_MISSING "the benchmark was configured without c10d Gloo"
#endif

namespace bench {

std::unique_ptr<Peer> make_gloo_peer(MPI_Comm /*comm*/, std::string& why_not) {
  why_not = ACCELERATE_BENCH_GLOO_MISSING;
  return nullptr;
}

}  // namespace bench
