// What the numbers were measured on: host, cores, binding, and the versions
// of MPI, LibTorch, BLAS and Accelerate-HPC, as ordered key/value pairs for
// the report header and the JSON.
#pragma once

#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

namespace bench {

struct SystemInfo {
  std::vector<std::pair<std::string, std::string>> entries;
  int cores_online = 0;         ///< CPUs online on rank 0's host
  int ranks_on_host = 0;        ///< ranks sharing rank 0's host
  bool oversubscribed = false;  ///< more ranks than cores on some host
};

/// Collective over `comm`; meaningful on rank 0.
SystemInfo collect_system_info(MPI_Comm comm);

/// /proc/loadavg's 1, 5 and 15 minute averages ("0.52 0.61 0.70").
std::string load_average();

/// The BLAS (and LAPACK) libraries loaded in this process, resolved through
/// symlinks (Debian's alternatives), e.g. ".../openblas-pthread/libblas.so.3".
std::string loaded_blas();

}  // namespace bench
