// Algorithm choices the MPI backend makes for the MPI library it runs on.
//
// Open MPI 4.x serves non-blocking all-reduces through libnbc, whose default
// for in-place calls on few ranks is a reduce followed by a broadcast with a
// full-size temporary: about half the bandwidth of its blocking
// MPI_Allreduce (bench/collectives). Its ring algorithm matches the blocking
// call. The backend selects it once per process through the MPI tool
// interface (MPI_T), unless the user chose an algorithm with
// OMPI_MCA_coll_libnbc_iallreduce_algorithm. Other MPI libraries are left
// alone.
#pragma once

namespace accelerate::detail {

/// True when non-blocking all-reduce runs an algorithm as fast as the
/// blocking one for large messages (the ring was selected, or the MPI is not
/// Open MPI). Idempotent; call after MPI_Init.
bool tune_nonblocking_allreduce();

}  // namespace accelerate::detail
