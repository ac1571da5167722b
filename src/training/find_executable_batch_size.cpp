#include "accelerate/training/find_executable_batch_size.hpp"

#include <ATen/ATen.h>

#include <new>
#include <string_view>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/device_memory.hpp"

namespace accelerate {

bool is_out_of_memory(const std::exception& error) noexcept {
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) return true;
  const std::string_view message = error.what();
  for (const std::string_view marker :
       {"out of memory", "DefaultCPUAllocator: can't allocate memory", "CUDNN_STATUS_NOT_SUPPORTED"}) {
    if (message.find(marker) != std::string_view::npos) return true;
  }
  return false;
}

namespace detail {

AttemptOutcome agree_on_outcome(ProcessGroup& group, AttemptOutcome mine) {
  at::Tensor flag = at::full({1}, static_cast<int>(mine), at::kInt);
  AllReduceOptions max;
  max.op = ReduceOp::Max;
  group.all_reduce(flag, max);
  return static_cast<AttemptOutcome>(flag.item<int>());
}

void throw_no_batch_size(std::int64_t starting_batch_size) {
  throw ConfigError("find_executable_batch_size: out of memory at every batch size from " +
                    std::to_string(starting_batch_size) +
                    " down to 1. Reduce the model or the input size, or use more memory per process.");
}

void release_after_out_of_memory() noexcept { clear_device_cache(); }

void throw_failed_elsewhere(std::int64_t batch_size) {
  throw Error(
      "find_executable_batch_size: another rank failed with an error other than out-of-memory at batch "
      "size " +
      std::to_string(batch_size) + " (see its message); stopping here too.");
}

}  // namespace detail
}  // namespace accelerate
