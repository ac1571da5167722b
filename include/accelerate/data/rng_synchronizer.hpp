// RngSynchronizer: makes the generators named in DataLoaderOptions::rng_types
// identical on every process at the start of each pass over a loader
// (seeds: rng_types), so that random work done in the loop or the dataset
// (augmentation, dropout masks drawn from the global generator) starts alike.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "accelerate/runtime/state.hpp"

namespace accelerate {

class ProcessGroup;

namespace detail {

class RngSynchronizer {
 public:
  /// Collective over state's world. Throws ConfigError (naming `component`)
  /// for an unknown generator name.
  RngSynchronizer(const State& state, std::vector<std::string> rng_types, std::string_view component);
  ~RngSynchronizer();
  RngSynchronizer(const RngSynchronizer&) = delete;
  RngSynchronizer& operator=(const RngSynchronizer&) = delete;

  /// Collective: broadcasts rank 0's states of the named generators.
  void synchronize();

 private:
  std::vector<std::string> types_;  // "torch" and "cuda"; "generator" needs no work here
  std::unique_ptr<ProcessGroup> group_;
};

}  // namespace detail
}  // namespace accelerate
