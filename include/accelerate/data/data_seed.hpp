// The seed of a loader's shuffled order: DataLoaderConfiguration::data_seed
// when set, else the seed given to set_seed, else drawn on rank 0 and
// broadcast, so that every process shuffles alike.
#pragma once

#include <cstdint>
#include <string_view>

#include "accelerate/data/data_loader_configuration.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate::detail {

/// data_seed if set; 0 without shuffle; else base_seed() (the seed of the
/// last set_seed, without its device-specific offset) if set_seed ran; else
/// a fresh seed from rank 0 (collective over state->world_comm()). Without a State (state == nullptr)
/// a drawn seed cannot be shared: more than one process is then a
/// ConfigError naming `component`.
std::uint64_t choose_data_seed(const DataLoaderConfiguration& config, bool shuffle, const State* state,
                               int num_processes, std::string_view component);

}  // namespace accelerate::detail
