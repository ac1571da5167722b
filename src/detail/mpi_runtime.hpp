// Questions about the MPI library itself that are safe at any time: before
// MPI_Init, after MPI_Finalize, from error paths.
#pragma once

#include <chrono>
#include <optional>

namespace accelerate::detail {

/// True while MPI calls are allowed (initialised and not yet finalised).
[[nodiscard]] bool mpi_is_running() noexcept;

struct WorldPosition {
  int rank = 0;
  int size = 1;
};
/// This process's rank and the size of MPI_COMM_WORLD, while MPI runs. The
/// first call asks MPI (make it on the main thread); later calls, from any
/// thread, return the cached answer.
[[nodiscard]] std::optional<WorldPosition> world_position() noexcept;

/// How long MPI_Abort may wait to be killed with its job before this
/// process ends itself (exit code 3, blocking_call_watchdog.hpp).
inline constexpr std::chrono::seconds kAbortGrace{1};

/// MPI_Abort over MPI_COMM_WORLD while MPI runs; returns when MPI does not
/// run. Ends this process after kAbortGrace if MPI_Abort does not.
void abort_running_mpi(int exit_code) noexcept;

}  // namespace accelerate::detail
