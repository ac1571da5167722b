// The position of a data loader, for exact resume (seeds: skip_first_batches,
// Accelerator.save_state / load_state). Pure arithmetic: no MPI, no LibTorch.
// Semantics and examples: docs/data-loading.md, "Exact resume".
//
// The model. All ranks together read one global sample stream per epoch: the
// epoch's sample order (seeded_permutation(n, seed, epoch), or 0 … n-1),
// followed by the padding of even_batches. Batch k of every rank is cut from
// the stream positions k·G … (k+1)·G-1, where G is the global batch size
// (batch_size × num_processes, or batch_size with split_batches). So a
// position in the stream is a multiple of G that does not depend on the
// number of processes, and a run can resume on a different world size as
// long as G stays the same: every rank continues at batch samples_consumed / G.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "accelerate/data/batch_sampler_shard.hpp"

namespace accelerate {

/// Where a data loader stands, saved with a checkpoint and identical on every
/// rank (so one copy suffices).
struct LoaderState {
  /// The data seed of the seeded sampler (the same on every rank).
  std::uint64_t seed = 0;
  /// The epoch in progress, from 0.
  std::int64_t epoch = 0;
  /// Positions of the epoch's global sample stream that all ranks together
  /// have consumed, in sampler order: batches completed × global_batch_size.
  /// A padded or short last batch counts in full, so this is always a
  /// multiple of global_batch_size.
  std::int64_t samples_consumed = 0;
  /// G: samples per batch of all ranks together.
  std::int64_t global_batch_size = 1;
  /// The number of processes when the state was saved (G is a multiple of it).
  int world_size = 1;
  /// The number of samples of the dataset, or -1 when unknown (a stream).
  /// The shuffled order depends on it, so a resume checks it when known.
  std::int64_t dataset_size = -1;

  using Dict = std::map<std::string, std::int64_t>;
  /// The version of the state-dict layout, stored under "version".
  static constexpr std::int64_t kFormatVersion = 1;

  /// Checks every field; throws ConfigError naming the first bad field.
  void validate() const;

  /// The state as a string-keyed map of integers, with the keys "version",
  /// "seed", "epoch", "samples_consumed", "global_batch_size", "world_size"
  /// and "dataset_size". The seed is stored as the int64 with the same bits
  /// (seeds of 2^63 and above appear negative). Validates first.
  [[nodiscard]] Dict state_dict() const;

  /// Reads a map written by state_dict(). Throws ConfigError naming the field
  /// for a missing key, an unknown key, another version or a bad value.
  [[nodiscard]] static LoaderState from_state_dict(const Dict& dict);

  /// Batches each rank has completed this epoch: samples_consumed / G.
  [[nodiscard]] std::int64_t batches_consumed() const noexcept { return samples_consumed / global_batch_size; }

  /// Records `batches` more batches of every rank: samples_consumed += batches × G.
  void advance(std::int64_t batches = 1);
  /// Moves to the start of `epoch` (samples_consumed = 0).
  void start_epoch(std::int64_t epoch);

  friend bool operator==(const LoaderState&, const LoaderState&) = default;
};

/// Where one process continues after loading a LoaderState.
struct ResumePoint {
  /// The epoch to continue (SeedableRandomSampler::set_epoch).
  std::int64_t epoch = 0;
  /// The first batch this process yields next: skip_first_batches(shard,
  /// batch_index) over a shard of this epoch's order. The same on every rank.
  std::int64_t batch_index = 0;
  /// The stream position of that batch's first sample: samples_consumed +
  /// process_index × process_batch_size.
  std::int64_t first_sample = 0;
  /// The batch size to build this run's BatchSamplerShard (or
  /// IterableDatasetShard) with: G / num_processes, or G with split_batches.
  std::int64_t batch_size = 0;
  /// Samples this process takes per batch: G / num_processes.
  std::int64_t process_batch_size = 0;
};

/// Where process `options.process_index` of `options.num_processes`
/// continues the epoch described by `saved`, with this run's global batch
/// size and, when known (>= 0), dataset size. The world size may differ from
/// the saved one; split_batches may differ too. even_batches and drop_last
/// only affect the last batch of the epoch and are not part of the state.
///
/// Throws ConfigError when the state is invalid, when the global batch size
/// differs from the saved one (the remaining samples would be batched
/// differently; the message says which per-process batch size keeps it, or
/// to resume at the next epoch with saved.start_epoch(saved.epoch + 1)), when
/// this world size does not divide it, or when both dataset sizes are known
/// and differ (the shuffled order would differ).
[[nodiscard]] ResumePoint resume_point(const LoaderState& saved, std::int64_t global_batch_size,
                                       const BatchSamplerShardOptions& options, std::int64_t dataset_size = -1);

}  // namespace accelerate
