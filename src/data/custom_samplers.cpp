#include "accelerate/data/custom_samplers.hpp"

#include <string>

#include "accelerate/data/collate.hpp"

namespace accelerate::detail {

void check_samplers(std::string_view component, const DataLoaderOptions& options) {
  if (options.sampler && options.shuffle) {
    loader_error(component,
                 "a sampler and shuffle were both given, but the sampler decides the order. Leave shuffle "
                 "false and shuffle inside the sampler (it receives the epoch and the data seed).");
  }
  if (!options.batch_sampler) return;
  std::string clash;
  if (options.shuffle) clash = "shuffle";
  if (options.sampler) clash = "a sampler";
  if (options.drop_last) clash = "drop_last";
  if (options.batch_size != 1) clash = "batch size " + std::to_string(options.batch_size);
  if (!clash.empty()) {
    loader_error(component, "a batch sampler and " + clash +
                                " were both given, but the batch sampler decides the batches, their size and "
                                "order. Leave batch_size 1, shuffle and drop_last false and sampler empty.");
  }
}

void reject_samplers(std::string_view component, const DataLoaderOptions& options) {
  if (options.sampler || options.batch_sampler) {
    loader_error(component, std::string(options.sampler ? "a sampler" : "a batch sampler") +
                                " was given, which this loader does not take. Use a DataLoaderShard "
                                "(dispatch_batches unset or false, over a map-style dataset).");
  }
}

void check_sampled_indices(std::string_view which, std::int64_t epoch, const std::vector<std::int64_t>& indices,
                           std::int64_t dataset_size) {
  const std::string name = std::string(which) + " (epoch " + std::to_string(epoch) + ")";
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= dataset_size) {
      loader_error(name, "returned the index " + std::to_string(indices[i]) + " at position " + std::to_string(i) +
                             ", but the dataset has " + std::to_string(dataset_size) + " samples (indices 0 ... " +
                             std::to_string(dataset_size - 1) + ").");
    }
  }
}

void check_same_epoch_size(std::string_view which, std::int64_t epoch, std::string_view what, std::int64_t found,
                           std::int64_t expected) {
  loader_error(std::string(which) + " (epoch " + std::to_string(epoch) + ")",
               "returned " + std::to_string(found) + " " + std::string(what) + ", but epoch 0 had " +
                   std::to_string(expected) +
                   ". The loader's length, the rounds every process steps through and the resume position are "
                   "fixed from epoch 0; return as many in every epoch.");
}

std::optional<std::int64_t> uniform_batch_size(const std::vector<std::vector<std::int64_t>>& batches) {
  if (batches.empty()) return 1;  // an empty epoch: any size shards it alike
  const auto size = static_cast<std::int64_t>(batches.front().size());
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const auto mine = static_cast<std::int64_t>(batches[k].size());
    if (k + 1 < batches.size() ? mine != size : mine > size) return std::nullopt;
  }
  return size;
}

}  // namespace accelerate::detail
