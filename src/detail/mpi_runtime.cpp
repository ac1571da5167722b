#include "detail/mpi_runtime.hpp"

#include <mpi.h>

namespace accelerate::detail {

bool mpi_is_running() noexcept {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

std::optional<WorldPosition> world_position() noexcept {
  if (!mpi_is_running()) return std::nullopt;
  WorldPosition position;
  MPI_Comm_rank(MPI_COMM_WORLD, &position.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &position.size);
  return position;
}

void abort_running_mpi(int exit_code) noexcept {
  if (mpi_is_running()) MPI_Abort(MPI_COMM_WORLD, exit_code);
}

}  // namespace accelerate::detail
