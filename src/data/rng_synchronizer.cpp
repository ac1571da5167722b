#include "accelerate/data/rng_synchronizer.hpp"

#include <utility>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/data/collate.hpp"
#include "accelerate/error.hpp"
#include "accelerate/random/rng_state.hpp"

namespace accelerate::detail {

RngSynchronizer::RngSynchronizer(const State& state, std::vector<std::string> rng_types, std::string_view component) {
  for (std::string& name : rng_types) {
    try {
      // The loaders' own order needs no "generator": it is a pure function
      // of the data seed, which every process holds from construction on.
      if (parse_rng_type(name) != RngType::Generator) types_.push_back(std::move(name));
    } catch (const ConfigError& error) {
      loader_error(component, std::string("DataLoaderOptions::rng_types: ") + error.what());
    }
  }
  group_ = ProcessGroup::world(state);
}

RngSynchronizer::~RngSynchronizer() = default;

void RngSynchronizer::synchronize() {
  if (!types_.empty()) synchronize_rng_states(types_, *group_);
}

}  // namespace accelerate::detail
