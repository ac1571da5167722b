// Which launcher started this process, read from the environment it left.
//
// Launchers export the rank layout before MPI_Init runs, which is early
// enough to pick a GPU before a CUDA-aware MPI touches one. MPI remains the
// authority: State cross-checks what the launcher said against MPI and
// reports a disagreement (e.g. srun with the wrong --mpi plugin starting N
// singleton worlds) as a LaunchError.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace accelerate {

enum class LauncherKind {
  None,     ///< started directly, no launcher environment
  OpenMpi,  ///< Open MPI's mpirun / mpiexec (ORTE / PRRTE)
  Hydra,    ///< MPICH's mpiexec (Hydra) or another PMI-1 launcher
  Slurm,    ///< srun, direct launch through PMIx / PMI-2
  Pals,     ///< HPE PALS (PBS Pro with Cray's mpiexec)
};

std::string_view to_string(LauncherKind kind);

/// The job layout as the launcher described it. Fields the launcher does not
/// export stay empty.
struct LauncherInfo {
  LauncherKind kind = LauncherKind::None;
  std::optional<int> rank;
  std::optional<int> size;
  std::optional<int> local_rank;
  std::optional<int> local_size;
  std::optional<std::string> job_id;  ///< scheduler job id (Slurm, PBS) when inside a job
  std::string evidence;               ///< the variables the decision was based on
};

/// Reads one environment variable; returns nullopt when it is unset.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string&)>;

/// Detects the launcher from the process environment.
LauncherInfo detect_launcher();

/// Detects the launcher from an arbitrary variable lookup (for tests and tools).
LauncherInfo detect_launcher(const EnvironmentLookup& lookup);

/// Throws LaunchError when the launcher's rank/size disagree with MPI's world.
void check_launcher_matches_mpi(const LauncherInfo& launcher, int mpi_rank, int mpi_size);

}  // namespace accelerate
