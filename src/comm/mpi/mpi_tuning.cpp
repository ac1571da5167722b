#include "comm/mpi/mpi_tuning.hpp"

#include <mpi.h>

#include <cstdlib>
#include <mutex>

namespace accelerate::detail {
namespace {

#ifdef OPEN_MPI
bool select_libnbc_ring() {
  constexpr const char* kVariable = "coll_libnbc_iallreduce_algorithm";
  if (std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm") != nullptr) return false;  // the user decided
  // Ask MPI_T for the level MPI already runs at: Open MPI 4.1 overwrites the
  // process's MPI_Query_thread answer with the level MPI_T is initialised at.
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  int provided = 0;
  if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) return false;
  bool selected = false;
  int index = -1;
  if (MPI_T_cvar_get_index(kVariable, &index) == MPI_SUCCESS) {
    MPI_T_cvar_handle handle;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
      const int ring = 1;  // libnbc: 0 automatic, 1 ring, 2 binomial, 3 rabenseifner, 4 recursive doubling
      selected = MPI_T_cvar_write(handle, &ring) == MPI_SUCCESS;
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
  return selected;
}
#endif

}  // namespace

bool tune_nonblocking_allreduce() {
  static std::once_flag once;
  static bool tuned = false;
  std::call_once(once, [] {
#ifdef OPEN_MPI
    tuned = select_libnbc_ring();
#else
    tuned = true;
#endif
  });
  return tuned;
}

}  // namespace accelerate::detail
