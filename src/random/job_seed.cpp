#include <string>
#include <utility>
#include <vector>

#include "accelerate/error.hpp"
#include "accelerate/random/seed.hpp"
#include "accelerate/runtime/environment.hpp"
#include "detail/fnv1a.hpp"

namespace accelerate {

namespace {

// The scheduler's identity of this job, or an empty string outside one.
std::string job_identity() {
  const auto value = [](const char* name) { return get_env(name).value_or(""); };
  const std::string slurm_array_job = value("SLURM_ARRAY_JOB_ID");
  const std::string slurm_array_task = value("SLURM_ARRAY_TASK_ID");
  if (!slurm_array_job.empty() && !slurm_array_task.empty()) {
    return "slurm:" + slurm_array_job + ":" + slurm_array_task;
  }
  const std::string slurm_job = value("SLURM_JOB_ID");
  if (!slurm_job.empty()) return "slurm:" + slurm_job;
  const std::string pbs_job = value("PBS_JOBID");
  if (!pbs_job.empty()) {
    std::string index = value("PBS_ARRAY_INDEX");     // PBS Pro / OpenPBS
    if (index.empty()) index = value("PBS_ARRAYID");  // Torque
    return index.empty() ? "pbs:" + pbs_job : "pbs:" + pbs_job + ":" + index;
  }
  return {};
}

}  // namespace

std::uint64_t job_seed_of(const char* identity) noexcept {
  std::uint64_t hash = detail::fnv1a(identity);
  // SplitMix64's finaliser spreads FNV's weak high bits over the word.
  hash += 0x9E3779B97F4A7C15ULL;
  hash = (hash ^ (hash >> 30)) * 0xBF58476D1CE4E5B9ULL;
  hash = (hash ^ (hash >> 27)) * 0x94D049BB133111EBULL;
  return hash ^ (hash >> 31);
}

std::uint64_t seed_from_job() {
  const std::string identity = job_identity();
  if (identity.empty()) {
    throw ConfigError(
        "seed_from_job: no batch-scheduler job id in the environment (looked for "
        "SLURM_ARRAY_JOB_ID+SLURM_ARRAY_TASK_ID, SLURM_JOB_ID, PBS_JOBID). Outside a Slurm or PBS "
        "job, pass a seed to set_seed explicitly or call seed_from_job(fallback).");
  }
  return job_seed_of(identity.c_str());
}

std::uint64_t seed_from_job(std::uint64_t fallback) {
  const std::string identity = job_identity();
  return identity.empty() ? fallback : job_seed_of(identity.c_str());
}

}  // namespace accelerate
