// prepare_data_loader (seeds: accelerate.data_loader.prepare_data_loader):
// picks the loader that Accelerate would for a dataset and a configuration.
//
//                       dispatch_batches unset   true                   false
//   map-style dataset   DataLoaderShard          DataLoaderDispatcher   DataLoaderShard
//   stream              DataLoaderDispatcher     DataLoaderDispatcher   StreamDataLoaderShard
#pragma once

#include <memory>
#include <utility>

#include "accelerate/data/data_loader.hpp"
#include "accelerate/data/data_loader_configuration.hpp"
#include "accelerate/data/data_loader_dispatcher.hpp"
#include "accelerate/data/data_loader_options.hpp"
#include "accelerate/data/data_loader_shard.hpp"
#include "accelerate/data/stream_data_loader_shard.hpp"
#include "accelerate/data/stream_dataset.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate {

/// Collective over state's world when the chosen loader communicates (a
/// dispatcher, or a shuffled loader without data_seed).
template <class Dataset>
requires MapStyleDataset<Dataset> || StreamDataset<Dataset> std::unique_ptr<DataLoader> prepare_data_loader(
    Dataset dataset, const State& state, DataLoaderOptions options = {}, DataLoaderConfiguration config = {}) {
  if constexpr (MapStyleDataset<Dataset>) {
    if (config.dispatch_batches.value_or(false)) {
      return std::make_unique<DataLoaderDispatcher<Dataset>>(std::move(dataset), state, std::move(options), config);
    }
    return std::make_unique<DataLoaderShard<Dataset>>(std::move(dataset), state, std::move(options), config);
  } else {
    if (config.dispatch_batches.value_or(true)) {
      return std::make_unique<DataLoaderDispatcher<Dataset>>(std::move(dataset), state, std::move(options), config);
    }
    return std::make_unique<StreamDataLoaderShard<Dataset>>(std::move(dataset), state, std::move(options), config);
  }
}

}  // namespace accelerate
