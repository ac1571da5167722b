// The checks of user-given samplers and batch samplers
// (DataLoaderOptions::sampler, ::batch_sampler): their options together,
// the indices they return, and the sizes they must keep from epoch to
// epoch. No MPI, no LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "accelerate/data/data_loader_options.hpp"

namespace accelerate::detail {

/// Throws ConfigError naming `component` for options that cannot go
/// together (torch's rules): a sampler with shuffle; a batch sampler with
/// shuffle, a sampler, drop_last, or a batch size other than 1.
void check_samplers(std::string_view component, const DataLoaderOptions& options);

/// For the loaders that take neither (the dispatcher, the stream loader):
/// ConfigError naming `component` when a sampler or batch sampler is set.
void reject_samplers(std::string_view component, const DataLoaderOptions& options);

/// Throws ConfigError naming the sampler (`which`), the epoch and the first
/// index outside 0 … dataset_size-1; an empty batch is an error too.
void check_sampled_indices(std::string_view which, std::int64_t epoch, const std::vector<std::int64_t>& indices,
                           std::int64_t dataset_size);

/// Throws ConfigError: epoch `epoch` of the sampler (`which`) has `found`
/// samples or batches (`what`), but epoch 0 had `expected`.
[[noreturn]] void check_same_epoch_size(std::string_view which, std::int64_t epoch, std::string_view what,
                                        std::int64_t found, std::int64_t expected);

/// The batch size of batches that all hold it but the last, which holds at
/// most as many; std::nullopt when they vary otherwise.
std::optional<std::int64_t> uniform_batch_size(const std::vector<std::vector<std::int64_t>>& batches);

}  // namespace accelerate::detail
