// Timing harness: interleaved repetitions, iteration counts agreed over MPI.
//
// For one (collective, size) every candidate is timed in the same loop:
//
//   calibrate:  1 warm-up call, then 1 timed call (and `probe` more when
//               that is short); the slowest rank's time per call sets a
//               common iteration count ceil(batch / t), clamped to
//               [min_iterations, max_iterations].
//   repeat R×:  (R = repetitions, or slow_repetitions when some candidate's
//               single call outlasts a batch: the 16 and 64 MiB sizes)
//               for each candidate (the starting candidate rotates every
//               repetition): MPI_Barrier, time `iterations` back-to-back
//               calls, take the slowest rank's elapsed time (MPI_MAX).
//
// One sample = that maximum / iterations, the time per operation as the
// last rank to finish sees it. Alongside, getrusage counts the minor page
// faults (fresh memory touched: an allocation per call shows here) and the
// involuntary context switches (another process took the core) of the
// timed batches. Candidates alternate within each repetition,
// so drifts of a noisy machine hit them alike and the ratios of medians
// compare calls measured side by side.
#pragma once

#include <mpi.h>

#include <vector>

#include "peer.hpp"

namespace bench {

struct Plan {
  int repetitions = 15;
  int slow_repetitions = 11;     ///< when a single call outlasts a batch
  double batch_seconds = 0.005;  ///< target duration of one timed batch
  int min_iterations = 1;
  int max_iterations = 20000;
  int probe = 5;
};

struct Samples {
  int iterations = 0;
  std::vector<double> seconds;         ///< one per repetition: max over ranks / iterations
  double page_faults_per_call = 0.0;   ///< minor faults over all timed calls, max over ranks
  double preemptions_per_batch = 0.0;  ///< involuntary context switches per batch, max over ranks

  [[nodiscard]] double median() const;
  [[nodiscard]] double quantile(double q) const;  ///< linear interpolation, q in [0, 1]
  [[nodiscard]] double min() const;
};

/// Times every candidate; the result is in the candidates' order. Collective over `comm`.
std::vector<Samples> measure(MPI_Comm comm, const std::vector<Candidate>& candidates, const Plan& plan);

}  // namespace bench
