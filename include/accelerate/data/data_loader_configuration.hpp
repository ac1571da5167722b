// DataLoaderConfiguration (seeds: accelerate.DataLoaderConfiguration): how
// Accelerate-HPC shards and places the batches of a data loader. Field names
// follow the seeds; the one documented difference is the default of
// use_seedable_sampler (true here, docs/data-loading.md, "Decision:
// use_seedable_sampler defaults to true"). Plain data: no MPI, no LibTorch.
#pragma once

#include <cstdint>
#include <optional>

namespace accelerate {

struct DataLoaderConfiguration {
  /// false: every process draws whole batches of batch_size (the global batch
  /// is batch_size × num_processes). true: every batch of batch_size is cut
  /// into num_processes slices (batch_size must be a multiple of it).
  bool split_batches = false;
  /// true: only the main process reads, and scatters each process its slice
  /// of every global batch (DataLoaderDispatcher). Unset: false for
  /// map-style datasets (DataLoaderShard), true for streams.
  /// prepare_data_loader picks the loader from it; DataLoaderShard itself,
  /// built directly, rejects true (construct a DataLoaderDispatcher).
  std::optional<bool> dispatch_batches;
  /// true: the last round is completed with samples from the start of the
  /// epoch, so every process yields the same number of full batches.
  bool even_batches = true;
  /// true (our default; Accelerate's is false): the epoch order is
  /// seeded_permutation(n, data_seed, epoch), recomputable from a checkpoint
  /// on every rank without communication.
  bool use_seedable_sampler = true;
  /// The seed of the seeded sampler. Unset: the seed of the last set_seed
  /// (without its device-specific offset), else rank 0 draws one and
  /// broadcasts it (a resumed run takes the checkpoint's seed either way).
  std::optional<std::uint64_t> data_seed;
  /// Host-to-device copies of the batches with non_blocking = true.
  bool non_blocking = false;
  /// Accepted for compatibility: DataLoaderShard always has
  /// state_dict()/load_state_dict() (through LoaderState), so this changes
  /// nothing.
  bool use_stateful_dataloader = false;

  friend bool operator==(const DataLoaderConfiguration&, const DataLoaderConfiguration&) = default;
};

}  // namespace accelerate
