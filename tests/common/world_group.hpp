// The world group the training tests run on: a one-minute deadline, and an
// abort of the whole job when it passes, so that a test that desynchronises
// its ranks fails at once instead of hanging until ctest's timeout.
#pragma once

#include <chrono>
#include <memory>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate::testing {

inline std::unique_ptr<ProcessGroup> world_group(const State& state) {
  ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(60);
  options.abort_on_timeout = true;
  return ProcessGroup::world(state, options);
}

}  // namespace accelerate::testing
