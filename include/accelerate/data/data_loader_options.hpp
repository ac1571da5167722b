// The options shared by the data loaders (DataLoaderShard,
// DataLoaderDispatcher, StreamDataLoaderShard): the batch size and order of
// the underlying LibTorch loader, worker threads, and where a loader runs when
// it has no State. Plain data: no MPI, no LibTorch.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/runtime/device_id.hpp"

namespace accelerate {

/// The loader options of the underlying torch DataLoader.
struct DataLoaderOptions {
  /// Without split_batches: the batch size of each process. With it: the
  /// batch size of all processes together (a multiple of num_processes).
  std::int64_t batch_size = 1;
  /// Visit the samples in the seeded order of the epoch (else 0 … n-1).
  bool shuffle = false;
  /// Stop the epoch at the first round the samples cannot fill.
  bool drop_last = false;
  /// The sample indices of an epoch in the order to visit them (torch's
  /// sampler), instead of shuffle: called at the start of every pass with the
  /// epoch and the loader's data seed. Every process must return the same
  /// order (the loader shards it), and every epoch as many indices as epoch 0.
  /// The loader's length is the sampler's. Map-style loaders only
  /// (DataLoaderShard).
  std::function<std::vector<std::int64_t>(std::int64_t epoch, std::uint64_t seed)> sampler = nullptr;
  /// The batches of an epoch, each a list of sample indices (torch's
  /// batch_sampler), instead of batch_size, shuffle, sampler and drop_last:
  /// called like sampler, with the same rules (every process the same
  /// batches, every epoch as many). The batches are dealt out whole, in
  /// turn; batches of varying size need even_batches = false
  /// (DataLoaderConfiguration). Map-style loaders only (DataLoaderShard).
  std::function<std::vector<std::vector<std::int64_t>>(std::int64_t epoch, std::uint64_t seed)> batch_sampler = nullptr;
  /// Threads that load and collate batches ahead of the training loop
  /// (0: load on the calling thread when the batch is needed).
  int num_workers = 0;
  /// With workers: at most num_workers × prefetch_factor batches are loaded
  /// ahead of the one the loop holds (the bounded queue).
  int prefetch_factor = 2;
  /// Called on each worker thread when it starts a pass, with the worker id
  /// and worker_seed(data seed, epoch, rank, worker): seed the worker's own
  /// generators here (torch's worker_init_fn). Also see current_worker_info().
  std::function<void(int worker, std::uint64_t seed)> worker_init_fn = nullptr;
  /// With a CUDA device: collate into page-locked host memory so the copy to
  /// the device can run asynchronously (with non_blocking). Ignored when the
  /// batches stay on the CPU, where there is no copy to speed up.
  bool pin_memory = false;
  /// Generators made identical on every process at the start of each pass
  /// (seeds: rng_types): "torch", "cuda", "generator". Empty: none. Needs a
  /// State; see docs/data-loading.md, "Randomness".
  std::vector<std::string> rng_types;
};

/// Where the loader runs when no State is at hand (tests, tools): the world
/// size and rank as plain numbers, and the device of the batches.
struct DataLoaderPlacement {
  int num_processes = 1;
  int process_index = 0;
  DeviceId device;  ///< the CPU unless given
};

/// The worker thread running the current code (torch's get_worker_info()).
struct WorkerInfo {
  int id = 0;
  int num_workers = 0;
  /// worker_seed(data seed, epoch, rank, id).
  std::uint64_t seed = 0;
};

}  // namespace accelerate
