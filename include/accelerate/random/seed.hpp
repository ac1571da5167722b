// Seeding (seeds: accelerate.utils.set_seed) and seeds for batch jobs.
//
//   accelerate::set_seed(42);                               // same on every rank
//   accelerate::set_seed(accelerate::seed_from_job(), false, true);
//
// What set_seed seeds: LibTorch's default CPU generator and, when CUDA is
// available, the default generator of every visible GPU (torch::manual_seed),
// and the C library's rand() (the counterpart of Python's `random`, which
// Accelerate seeds too). The library has no global engine of its own: the
// seeded data sampler's order is a pure function of the loader's data_seed
// and the epoch, so set_seed does not change the data order (and the data
// order does not depend on anything set_seed seeds). Generators the program
// creates itself must be seeded by the program.
//
// The device_specific trap: seeding every rank differently *before* the model
// is built gives every rank different initial parameters. Data-parallel
// training then needs them broadcast from rank 0 (the prepared model does
// this); otherwise the replicas train apart. See docs/reproducibility.md.
#pragma once

#include <cstdint>
#include <optional>

namespace accelerate {

class State;

/// Seeds the generators listed above with `seed`, or with seed + rank when
/// `device_specific` (rank = state->process_index(); ConfigError without a
/// State). `deterministic` additionally makes LibTorch use deterministic
/// algorithms (at::globalContext().setDeterministicAlgorithms: ops without a
/// deterministic implementation then throw), makes cuDNN deterministic with
/// benchmarking off, and sets CUBLAS_WORKSPACE_CONFIG=":4096:8" unless it is
/// already set (cuBLAS reads it when its first handle is created: call
/// set_seed before any CUDA work). `deterministic = false` changes none of
/// these settings (it does not switch determinism off).
void set_seed(std::uint64_t seed, bool device_specific = false, bool deterministic = false,
              const State* state = nullptr);

/// set_seed's options by name: `set_seed(42, {.device_specific = true}, &state)`.
struct SeedOptions {
  bool device_specific = false;
  bool deterministic = false;
};
inline void set_seed(std::uint64_t seed, const SeedOptions& options, const State* state = nullptr) {
  set_seed(seed, options.device_specific, options.deterministic, state);
}

/// The seed most recently passed to set_seed in this process, before the
/// device-specific offset (so the same on every rank that passed the same
/// seed); nullopt when set_seed was never called. The fallback for a
/// loader's data seed (docs/data-loading.md, "The data seed").
std::optional<std::uint64_t> base_seed() noexcept;

/// A 64-bit seed derived from the batch scheduler's job identity, so that
/// the tasks of a job array get different seeds while a requeued job (which
/// keeps its id) gets its own seed again. The identity is, first found:
///   Slurm array task   SLURM_ARRAY_JOB_ID and SLURM_ARRAY_TASK_ID
///   Slurm job          SLURM_JOB_ID
///   PBS array subjob   PBS_JOBID and PBS_ARRAY_INDEX (Torque: PBS_ARRAYID)
///   PBS job            PBS_JOBID
/// and the seed is job_seed_of(identity) (documented in
/// docs/reproducibility.md). Every rank of a job computes the same value.
/// Throws ConfigError when none of the variables is set (e.g. an
/// interactive run), saying which variables were looked for and to pass a
/// seed explicitly or use the overload with a fallback.
std::uint64_t seed_from_job();

/// As seed_from_job(), but returns `fallback` outside a batch job.
std::uint64_t seed_from_job(std::uint64_t fallback);

/// The seed of a job identity string such as "slurm:1234:7": FNV-1a (64-bit)
/// of the bytes, then the SplitMix64 finaliser. A pure function, stable
/// across versions and machines, so a seed can be recomputed from a log.
std::uint64_t job_seed_of(const char* identity) noexcept;

}  // namespace accelerate
