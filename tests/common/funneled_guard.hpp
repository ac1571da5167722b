// The MPI calls a test binary made from threads other than the main one.
// funneled_guard.cpp defines the MPI functions the library calls, notes the
// calling thread and forwards to PMPI_*; a binary linked with it (and with
// ENABLE_EXPORTS, so that the library's calls bind to these definitions)
// sees every off-thread call. MPI_Initialized, MPI_Finalized and
// MPI_Query_thread are not wrapped: MPI allows them from any thread.
#pragma once

#include <string>
#include <vector>

namespace accelerate::testing {

/// "MPI_Comm_rank" for each call made off the main thread, in call order
/// (the first 64).
std::vector<std::string> off_main_thread_mpi_calls();

/// Forgets the calls noted so far.
void clear_off_main_thread_mpi_calls();

/// Calls made through the guard from any thread: shows the guard is bound.
long guarded_mpi_calls();

}  // namespace accelerate::testing
