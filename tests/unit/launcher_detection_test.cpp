// Launcher detection from environments recorded under the real launchers
// (Open MPI 4.1 mpirun, srun with PMIx and PMI-2, an sbatch batch step,
// mpirun inside sbatch, MPICH Hydra, PALS), and the cross-check with MPI.
#include <gtest/gtest.h>

#include <map>

#include "accelerate/error.hpp"
#include "accelerate/runtime/launcher.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::detect_launcher;
using accelerate::LauncherKind;
using Env = std::map<std::string, std::string>;

accelerate::LauncherInfo detect(const Env& env) {
  return detect_launcher([&env](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

// The subset of variables a task of `srun -n 2` (Slurm 22.05) sees, rank 1.
Env srun_step(int rank) {
  return {{"SLURM_JOB_ID", "7"},        {"SLURM_STEP_ID", "0"},         {"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_LOCALID", std::to_string(rank)}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NUM_TASKS", "2"},
          {"SLURM_NODEID", "0"}};
}

TEST(LauncherDetection, NoLauncherIsNone) {
  const auto info = detect({{"HOME", "/root"}});
  EXPECT_EQ(info.kind, LauncherKind::None);
  EXPECT_FALSE(info.rank);
  EXPECT_FALSE(info.size);
  EXPECT_FALSE(info.job_id);
}

TEST(LauncherDetection, OpenMpiMpirun) {
  const auto info = detect({{"OMPI_COMM_WORLD_RANK", "3"},
                            {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                            {"PMIX_RANK", "3"}});
  EXPECT_EQ(info.kind, LauncherKind::OpenMpi);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_size, 2);
}

TEST(LauncherDetection, SrunWithPmix) {
  Env env = srun_step(1);
  env["SLURM_MPI_TYPE"] = "pmix";
  env["PMIX_RANK"] = "1";
  const auto info = detect(env);
  EXPECT_EQ(info.kind, LauncherKind::Slurm);
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.size, 2);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.job_id, "7");
}

TEST(LauncherDetection, SrunWithPmi2IsSlurmNotHydra) {
  // srun's PMI-2 plugin exports PMI_RANK/PMI_SIZE like Hydra does.
  Env env = srun_step(1);
  env["SLURM_MPI_TYPE"] = "pmi2";
  env["PMI_RANK"] = "1";
  env["PMI_SIZE"] = "2";
  env["PMI_FD"] = "11";
  const auto info = detect(env);
  EXPECT_EQ(info.kind, LauncherKind::Slurm);
  EXPECT_EQ(info.rank, 1);
}

TEST(LauncherDetection, BatchStepWithoutSrunIsNotALaunch) {
  // The batch script of `sbatch -n 2` has SLURM_PROCID=0 and SLURM_NTASKS=2
  // but no step: a program it runs directly is a world of one.
  const auto info = detect({{"SLURM_JOB_ID", "9"},
                            {"SLURM_PROCID", "0"},
                            {"SLURM_LOCALID", "0"},
                            {"SLURM_NTASKS", "2"},
                            {"SLURM_TASKS_PER_NODE", "2"}});
  EXPECT_EQ(info.kind, LauncherKind::None);
  EXPECT_EQ(info.job_id, "9");
}

TEST(LauncherDetection, MpirunInsideSbatchTrustsMpirun) {
  // Every rank inherits the batch step's SLURM_PROCID=0.
  Env env = {{"SLURM_JOB_ID", "9"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}};
  env["OMPI_COMM_WORLD_RANK"] = "1";
  env["OMPI_COMM_WORLD_SIZE"] = "2";
  env["OMPI_COMM_WORLD_LOCAL_RANK"] = "1";
  const auto info = detect(env);
  EXPECT_EQ(info.kind, LauncherKind::OpenMpi);
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.job_id, "9");
}

TEST(LauncherDetection, MpichHydra) {
  const auto info = detect({{"PMI_RANK", "2"},
                            {"PMI_SIZE", "4"},
                            {"MPI_LOCALRANKID", "0"},
                            {"MPI_LOCALNRANKS", "2"},
                            {"PMI_FD", "6"}});
  EXPECT_EQ(info.kind, LauncherKind::Hydra);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_size, 2);
}

TEST(LauncherDetection, PbsPals) {
  const auto info = detect({{"PBS_JOBID", "1234.pbs01"},
                            {"PALS_RANKID", "5"},
                            {"PALS_SIZE", "8"},
                            {"PALS_LOCAL_RANKID", "1"},
                            {"PALS_LOCAL_SIZE", "4"}});
  EXPECT_EQ(info.kind, LauncherKind::Pals);
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.size, 8);
  EXPECT_EQ(info.job_id, "1234.pbs01");
}

TEST(LauncherDetection, MalformedNumbersAreIgnoredNotMisread) {
  const auto info = detect({{"OMPI_COMM_WORLD_RANK", "1x"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(info.kind, LauncherKind::OpenMpi);
  EXPECT_FALSE(info.rank);
  EXPECT_EQ(info.size, 2);
}

TEST(LauncherCrossCheck, AgreementPasses) {
  accelerate::LauncherInfo info = detect(srun_step(1));
  EXPECT_NO_THROW(accelerate::check_launcher_matches_mpi(info, 1, 2));
  EXPECT_NO_THROW(accelerate::check_launcher_matches_mpi(detect({}), 0, 1));
}

TEST(LauncherCrossCheck, SingletonWorldsUnderSrunExplainThePmiPlugin) {
  const accelerate::LauncherInfo info = detect(srun_step(1));
  try {
    accelerate::check_launcher_matches_mpi(info, 0, 1);
    FAIL() << "expected LaunchError";
  } catch (const accelerate::LaunchError& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("started 2 processes"), std::string::npos) << text;
    EXPECT_NE(text.find("world of 1"), std::string::npos) << text;
    EXPECT_NE(text.find("--mpi=pmi2"), std::string::npos) << text;
    EXPECT_NE(text.find("slurm-srun"), std::string::npos) << text;
  }
}

TEST(LauncherCrossCheck, RankDisagreementIsAnError) {
  const accelerate::LauncherInfo info = detect(srun_step(1));
  EXPECT_THROW(accelerate::check_launcher_matches_mpi(info, 0, 2), accelerate::LaunchError);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
