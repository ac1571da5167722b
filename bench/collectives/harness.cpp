#include "harness.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace bench {

double Samples::quantile(double q) const {
  if (seconds.empty()) return 0.0;
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  const double weight = position - static_cast<double>(below);
  return sorted[below] * (1.0 - weight) + sorted[above] * weight;
}

double Samples::median() const { return quantile(0.5); }

double Samples::min() const { return seconds.empty() ? 0.0 : *std::min_element(seconds.begin(), seconds.end()); }

namespace {

// Runs `iterations` calls between a barrier and the clock; returns the
// slowest rank's elapsed seconds.
double timed_batch(MPI_Comm comm, const Candidate& candidate, int iterations) {
  MPI_Barrier(comm);
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i) candidate.call();
  double elapsed = MPI_Wtime() - start;
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, comm);
  return elapsed;
}

int calibrate(MPI_Comm comm, const Candidate& candidate, const Plan& plan) {
  candidate.call();  // first call: lazy set-up, cold caches
  double per_call = timed_batch(comm, candidate, 1);
  // Short calls: a longer probe for a steadier estimate.
  if (per_call * plan.probe < plan.batch_seconds) per_call = timed_batch(comm, candidate, plan.probe) / plan.probe;
  const double wanted = per_call > 0.0 ? std::ceil(plan.batch_seconds / per_call) : plan.max_iterations;
  return static_cast<int>(
      std::clamp(wanted, static_cast<double>(plan.min_iterations), static_cast<double>(plan.max_iterations)));
}

}  // namespace

std::vector<Samples> measure(MPI_Comm comm, const std::vector<Candidate>& candidates, const Plan& plan) {
  std::vector<Samples> results(candidates.size());
  bool slow = false;
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    results[c].iterations = calibrate(comm, candidates[c], plan);
    slow = slow || results[c].iterations <= 1;
  }
  const int repetitions = slow ? std::min(plan.repetitions, plan.slow_repetitions) : plan.repetitions;
  // Per candidate: minor faults and involuntary switches during its batches.
  std::vector<std::array<double, 2>> counters(candidates.size(), {0.0, 0.0});
  for (int repetition = 0; repetition < repetitions; ++repetition) {
    for (std::size_t k = 0; k < candidates.size(); ++k) {
      const std::size_t c = (k + static_cast<std::size_t>(repetition)) % candidates.size();
      rusage before{};
      getrusage(RUSAGE_SELF, &before);
      const double elapsed = timed_batch(comm, candidates[c], results[c].iterations);
      rusage after{};
      getrusage(RUSAGE_SELF, &after);
      counters[c][0] += static_cast<double>(after.ru_minflt - before.ru_minflt);
      counters[c][1] += static_cast<double>(after.ru_nivcsw - before.ru_nivcsw);
      results[c].seconds.push_back(elapsed / results[c].iterations);
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, counters.data(), static_cast<int>(2 * counters.size()), MPI_DOUBLE, MPI_MAX, comm);
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    results[c].page_faults_per_call = counters[c][0] / (static_cast<double>(results[c].iterations) * repetitions);
    results[c].preemptions_per_batch = counters[c][1] / repetitions;
  }
  return results;
}

}  // namespace bench
