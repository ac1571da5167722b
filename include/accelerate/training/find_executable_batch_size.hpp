// find_executable_batch_size (seeds: accelerate.utils.find_executable_batch_size):
// runs `fn(batch_size)`, halving the batch size after an out-of-memory error
// until it fits. Between attempts the CUDA caching allocator's free blocks
// go back to the driver (clear_device_cache), so the cache a failed attempt
// left behind does not make the next one fail.
//
// Unlike Accelerate, the ranks agree: after every attempt the outcome is
// all-reduced, so when one rank runs out of memory every rank retries with
// the same smaller size (otherwise ranks train with different batch sizes
// and their collectives no longer match). Consequently `fn` must not leave
// a rank waiting in a collective that another rank skipped because it ran
// out of memory: run out of memory before the first collective of an
// attempt (e.g. a first forward/backward on a full batch), or keep the
// collectives' timeouts in mind (docs/training.md).
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace accelerate {

class ProcessGroup;

/// Whether `error` reports an allocation failure (std::bad_alloc, CUDA or
/// CPU allocator out of memory, cuDNN's not-supported for huge batches).
bool is_out_of_memory(const std::exception& error) noexcept;

namespace detail {
enum class AttemptOutcome : int { Ok = 0, OutOfMemory = 1, Failed = 2 };
/// All-reduces the outcome (the worst wins) over `group`.
AttemptOutcome agree_on_outcome(ProcessGroup& group, AttemptOutcome mine);
[[noreturn]] void throw_no_batch_size(std::int64_t starting_batch_size);
/// Gives the device cache back before the next, smaller attempt.
void release_after_out_of_memory() noexcept;
[[noreturn]] void throw_failed_elsewhere(std::int64_t batch_size);
}  // namespace detail

template <class Fn>
auto find_executable_batch_size(ProcessGroup& group, std::int64_t starting_batch_size, Fn&& fn)
    -> std::invoke_result_t<Fn&, std::int64_t> {
  using Result = std::invoke_result_t<Fn&, std::int64_t>;
  for (std::int64_t batch_size = starting_batch_size; batch_size > 0; batch_size /= 2) {
    auto outcome = detail::AttemptOutcome::Ok;
    std::exception_ptr failure;
    [[maybe_unused]] std::optional<std::conditional_t<std::is_void_v<Result>, int, Result>> result;
    try {
      if constexpr (std::is_void_v<Result>) {
        fn(batch_size);
      } else {
        result.emplace(fn(batch_size));
      }
    } catch (const std::exception& error) {
      outcome = is_out_of_memory(error) ? detail::AttemptOutcome::OutOfMemory : detail::AttemptOutcome::Failed;
      if (outcome == detail::AttemptOutcome::Failed) failure = std::current_exception();
    }
    switch (detail::agree_on_outcome(group, outcome)) {
      case detail::AttemptOutcome::Ok:
        if constexpr (std::is_void_v<Result>) {
          return;
        } else {
          return std::move(*result);
        }
      case detail::AttemptOutcome::OutOfMemory: detail::release_after_out_of_memory(); continue;
      case detail::AttemptOutcome::Failed:
        if (failure) std::rethrow_exception(failure);
        detail::throw_failed_elsewhere(batch_size);
    }
  }
  detail::throw_no_batch_size(starting_batch_size);
}

}  // namespace accelerate
