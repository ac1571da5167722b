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
#include "accelerate/data/padding_collate.hpp"
#include "accelerate/data/stream_data_loader_shard.hpp"
#include "accelerate/data/stream_dataset.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate {

namespace detail {
[[noreturn]] inline void refuse_dispatch() {
  loader_error("prepare_data_loader",
               "dispatch_batches = true scatters slices of each global batch from the main process, which needs a "
               "batch of tensors cut along their first dimension (Example<>, a tensor, a string-keyed map or dict "
               "of tensors, or an IValue nest of tensors), but this loader's collate function returns another "
               "type. Set dispatch_batches = false (every process loads its own batches), or collate into one of "
               "these.");
}
}  // namespace detail

/// Collective over state's world when the chosen loader communicates (a
/// dispatcher, or a seeded order without data_seed). A map-style dataset
/// gets a DataLoaderShard, or with dispatch_batches a DataLoaderDispatcher;
/// a stream gets a dispatcher unless dispatch_batches is false. The
/// dispatcher scatters the batches collate_fn returns, so they must be a
/// ScatterableBatch (ConfigError otherwise).
template <class Dataset, class Collate = DefaultCollate>
requires MapStyleDataset<Dataset> || StreamDataset<Dataset>
auto prepare_data_loader(Dataset dataset, const State& state, DataLoaderOptions options = {},
                         DataLoaderConfiguration config = {}, Collate collate_fn = {}) {
  if constexpr (MapStyleDataset<Dataset>) {
    using Loader = BasicDataLoader<CollatedBatch<Dataset, Collate>>;
    if (config.dispatch_batches.value_or(false)) {
      if constexpr (DispatchableWith<Dataset, Collate>) {
        return std::unique_ptr<Loader>(
            std::make_unique<DataLoaderDispatcher<Dataset, Collate>>(std::move(dataset), state, std::move(options),
                                                                     config, std::move(collate_fn)));
      } else {
        detail::refuse_dispatch();
      }
    }
    return std::unique_ptr<Loader>(std::make_unique<DataLoaderShard<Dataset, Collate>>(std::move(dataset), state,
                                                                                       std::move(options), config,
                                                                                       std::move(collate_fn)));
  } else {
    using Loader = BasicDataLoader<StreamBatchOf<Dataset, Collate>>;
    if (config.dispatch_batches.value_or(true)) {
      if constexpr (DispatchableWith<Dataset, Collate>) {
        return std::unique_ptr<Loader>(
            std::make_unique<DataLoaderDispatcher<Dataset, Collate>>(std::move(dataset), state, std::move(options),
                                                                     config, std::move(collate_fn)));
      } else {
        detail::refuse_dispatch();
      }
    }
    return std::unique_ptr<Loader>(std::make_unique<StreamDataLoaderShard<Dataset, Collate>>(std::move(dataset), state,
                                                                                             std::move(options), config,
                                                                                             std::move(collate_fn)));
  }
}

}  // namespace accelerate
