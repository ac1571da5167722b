// prepare_data_loader (seeds: accelerate.data_loader.prepare_data_loader):
// picks the loader that Accelerate would for a dataset and a configuration.
//
//                       dispatch_batches unset   true                   false
//   map-style dataset   DataLoaderShard          DataLoaderDispatcher   DataLoaderShard
//   stream              DataLoaderDispatcher     DataLoaderDispatcher   StreamDataLoaderShard
#pragma once

#include <memory>
#include <type_traits>
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
/// dispatcher, or a seeded order without data_seed). A map-style dataset
/// gets a DataLoaderShard, or with dispatch_batches a DataLoaderDispatcher
/// (which scatters torch::data::Example<> batches: its samples must be
/// Example<> and the collate function the default); a stream gets a
/// dispatcher unless dispatch_batches is false. A collate function is for
/// map-style datasets.
template <class Dataset, class Collate = DefaultCollate>
requires MapStyleDataset<Dataset> || StreamDataset<Dataset>
auto prepare_data_loader(Dataset dataset, const State& state, DataLoaderOptions options = {},
                         DataLoaderConfiguration config = {}, Collate collate_fn = {}) {
  if constexpr (MapStyleDataset<Dataset>) {
    using Loader = BasicDataLoader<CollatedBatch<Dataset, Collate>>;
    if (config.dispatch_batches.value_or(false)) {
      if constexpr (ExampleDataset<Dataset> && std::is_same_v<Collate, DefaultCollate>) {
        return std::unique_ptr<Loader>(
            std::make_unique<DataLoaderDispatcher<Dataset>>(std::move(dataset), state, std::move(options), config));
      } else {
        detail::loader_error("prepare_data_loader",
                             "dispatch_batches = true scatters slices of torch::data::Example<> batches from the "
                             "main process, but this dataset's samples are another type or the loader has its own "
                             "collate function. Leave dispatch_batches unset or false (every process loads its "
                             "own batches), or return Example<> samples.");
      }
    }
    return std::unique_ptr<Loader>(std::make_unique<DataLoaderShard<Dataset, Collate>>(std::move(dataset), state,
                                                                                       std::move(options), config,
                                                                                       std::move(collate_fn)));
  } else {
    static_assert(std::is_same_v<Collate, DefaultCollate>,
                  "prepare_data_loader: a collate function is offered for map-style datasets (DataLoaderShard); a "
                  "stream's samples are torch::data::Example<>, stacked");
    if (config.dispatch_batches.value_or(true)) {
      return std::unique_ptr<DataLoader>(
          std::make_unique<DataLoaderDispatcher<Dataset>>(std::move(dataset), state, std::move(options), config));
    }
    return std::unique_ptr<DataLoader>(
        std::make_unique<StreamDataLoaderShard<Dataset>>(std::move(dataset), state, std::move(options), config));
  }
}

}  // namespace accelerate
