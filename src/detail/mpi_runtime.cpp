#include "detail/mpi_runtime.hpp"

#include <mpi.h>

#include <atomic>
#include <cstdint>

#include "detail/blocking_call_watchdog.hpp"

namespace accelerate::detail {

bool mpi_is_running() noexcept {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

std::optional<WorldPosition> world_position() noexcept {
  // MPI_Initialized and MPI_Finalized may be called from any thread; the rank
  // and size come from the first call (State makes it on the main thread
  // right after MPI_Init), so error paths on other threads make no MPI call
  // under MPI_THREAD_FUNNELED.
  static std::atomic<std::int64_t> cached{-1};  // rank << 32 | size, once known
  if (!mpi_is_running()) return std::nullopt;
  std::int64_t packed = cached.load(std::memory_order_acquire);
  if (packed < 0) {
    int rank = 0;
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    packed = (std::int64_t{rank} << 32) | static_cast<std::uint32_t>(size);
    cached.store(packed, std::memory_order_release);
  }
  return WorldPosition{static_cast<int>(packed >> 32), static_cast<int>(packed & 0xffffffff)};
}

void abort_running_mpi(int exit_code) noexcept {
  if (!mpi_is_running()) return;
  try {
    // MPI_Abort tells the launcher first, then waits to be killed with the
    // rest of the job; a launcher that lets ranks outlive their peers (Open
    // MPI's --enable-recovery) or a stopped peer can make that wait long.
    // The job's end is already on its way: leave after a short grace.
    const BlockingCallWatchdog watchdog("MPI_Abort (the launcher was told to end the job)", kAbortGrace);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  } catch (...) {
    MPI_Abort(MPI_COMM_WORLD, exit_code);  // arming failed: abort unwatched
  }
}

}  // namespace accelerate::detail
