#include "accelerate/runtime/launcher.hpp"

#include <charconv>
#include <cstdlib>

#include "accelerate/error.hpp"

namespace accelerate {
namespace {

std::optional<int> read_int(const EnvironmentLookup& lookup, const std::string& name) {
  const auto text = lookup(name);
  if (!text) return std::nullopt;
  int value = 0;
  const char* first = text->data();
  const char* last = first + text->size();
  const auto [end, error] = std::from_chars(first, last, value);
  if (error != std::errc{} || end != last) return std::nullopt;
  return value;
}

struct Variables {
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};

LauncherInfo read_layout(const EnvironmentLookup& lookup, LauncherKind kind, const Variables& v) {
  LauncherInfo info;
  info.kind = kind;
  info.rank = read_int(lookup, v.rank);
  info.size = read_int(lookup, v.size);
  if (v.local_rank != nullptr) info.local_rank = read_int(lookup, v.local_rank);
  if (v.local_size != nullptr) info.local_size = read_int(lookup, v.local_size);
  info.evidence = std::string(v.rank) + ", " + v.size;
  return info;
}

std::optional<std::string> scheduler_job_id(const EnvironmentLookup& lookup) {
  if (auto id = lookup("SLURM_JOB_ID")) return id;
  if (auto id = lookup("PBS_JOBID")) return id;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(LauncherKind kind) {
  switch (kind) {
    case LauncherKind::None: return "none";
    case LauncherKind::OpenMpi: return "openmpi-mpirun";
    case LauncherKind::Hydra: return "mpich-hydra";
    case LauncherKind::Slurm: return "slurm-srun";
    case LauncherKind::Pals: return "pbs-pals";
  }
  return "unknown";
}

LauncherInfo detect_launcher(const EnvironmentLookup& lookup) {
  LauncherInfo info;
  // The order matters: an mpirun inside an sbatch allocation inherits the
  // batch step's SLURM_* variables (SLURM_PROCID=0 on every rank), so the MPI
  // launchers' own variables are consulted before Slurm's.
  if (lookup("OMPI_COMM_WORLD_SIZE")) {
    info = read_layout(lookup, LauncherKind::OpenMpi,
                       {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                        "OMPI_COMM_WORLD_LOCAL_SIZE"});
  } else if (lookup("PALS_RANKID")) {
    info =
        read_layout(lookup, LauncherKind::Pals, {"PALS_RANKID", "PALS_SIZE", "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE"});
  } else if (lookup("MPI_LOCALRANKID") && lookup("PMI_RANK")) {
    // Hydra is the launcher that exports MPI_LOCALRANKID next to PMI_RANK;
    // srun's PMI-2 plugin sets PMI_RANK too, but never MPI_LOCALRANKID.
    info = read_layout(lookup, LauncherKind::Hydra, {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"});
  } else if (lookup("SLURM_STEP_ID") && lookup("SLURM_PROCID") && lookup("SLURM_STEP_NUM_TASKS")) {
    // Only a job step started by srun has SLURM_STEP_NUM_TASKS; the batch
    // script itself (and anything it runs without srun) does not.
    info = read_layout(lookup, LauncherKind::Slurm, {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", nullptr});
  } else if (lookup("PMI_RANK") && lookup("PMI_SIZE")) {
    info = read_layout(lookup, LauncherKind::Hydra, {"PMI_RANK", "PMI_SIZE", nullptr, nullptr});
  }
  info.job_id = scheduler_job_id(lookup);
  return info;
}

LauncherInfo detect_launcher() {
  return detect_launcher([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

void check_launcher_matches_mpi(const LauncherInfo& launcher, int mpi_rank, int mpi_size) {
  if (launcher.kind == LauncherKind::None) return;
  const std::string source = std::string(to_string(launcher.kind)) + " (" + launcher.evidence + ")";
  if (launcher.size && *launcher.size != mpi_size) {
    std::string message = "accelerate::State: the launcher " + source + " started " + std::to_string(*launcher.size) +
                          " processes but MPI reports a world of " + std::to_string(mpi_size) + ".";
    if (mpi_size == 1) {
      message +=
          " Each process came up as its own singleton world: MPI could not reach the launcher's "
          "process manager. With srun, pick the plugin that matches the MPI library "
          "(Open MPI: srun --mpi=pmix; MPICH: srun --mpi=pmi2); with mpirun/mpiexec, use the one "
          "that belongs to the MPI this program was linked against.";
    } else {
      message += " Check that the program and the launcher come from the same MPI installation.";
    }
    throw LaunchError(message);
  }
  if (launcher.rank && *launcher.rank != mpi_rank) {
    throw LaunchError("accelerate::State: the launcher " + source + " assigned rank " + std::to_string(*launcher.rank) +
                      " but MPI says rank " + std::to_string(mpi_rank) +
                      ". The launcher environment is stale or belongs to another job step; unset "
                      "the inherited variables or launch with the MPI library's own launcher.");
  }
}

}  // namespace accelerate
