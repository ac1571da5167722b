#include "accelerate/runtime/process_control.hpp"

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "accelerate/error.hpp"
#include "accelerate/format.hpp"
#include "detail/mpi_runtime.hpp"
#include "runtime/error_report.hpp"

namespace accelerate {

MainProcessFirst::MainProcessFirst(const State& state, Scope scope)
    : state_(state),
      scope_(scope),
      is_first_(scope == Scope::Global ? state.is_main_process() : state.is_local_main_process()),
      uncaught_(std::uncaught_exceptions()) {
  if (!is_first_) barrier();  // wait until the first process has left its scope
}

MainProcessFirst::~MainProcessFirst() noexcept(false) {
  if (!is_first_) return;
  // The first process releases the others. If it is unwinding from an
  // exception it still releases them, so they fail on their own terms
  // (missing file, …) rather than hang; a barrier error during unwinding is
  // dropped because throwing now would terminate the program.
  if (std::uncaught_exceptions() > uncaught_) {
    try {
      barrier();
    } catch (...) {
    }
    return;
  }
  barrier();
}

void MainProcessFirst::barrier() const {
  if (scope_ == Scope::Global) {
    state_.wait_for_everyone("main_process_first (barrier over all processes)");
  } else {
    state_.wait_for_node();
  }
}

ProcessSlice slice_for_process(std::size_t length, int count, int index) {
  const auto n = static_cast<std::size_t>(count);
  const auto i = static_cast<std::size_t>(index);
  const std::size_t base = length / n;
  const std::size_t extras = length % n;
  ProcessSlice slice;
  slice.begin = i * base + std::min(i, extras);
  slice.end = slice.begin + base + (i < extras ? 1 : 0);
  slice.padded_size = base + (extras > 0 ? 1 : 0);
  return slice;
}

namespace detail {

void check_split_lengths(const std::vector<std::pair<std::string_view, std::size_t>>& lengths) {
  for (const auto& [key, length] : lengths) {
    if (length == lengths.front().second) continue;
    throw ConfigError(accelerate::format(
        "split_between_processes: every value of the map must have the same length, but '{}' has {} items and "
        "'{}' has {}. Split the values one by one, or make them the same length.",
        lengths.front().first, lengths.front().second, key, length));
  }
}

}  // namespace detail

void abort_all(std::string_view message, int exit_code) noexcept {
  // The ranks that raise the same error print it once, through rank 0
  // (runtime/error_report.hpp); a rank whose report rank 0 did not take in
  // time prints its own, as does every rank without MPI or a State.
  if (!detail::report_error_once(message)) {
    try {
      // One write: the line must not interleave with other output of this or other ranks.
      const std::string line = detail::where() + " aborting the job: " + std::string(message) + "\n";
      std::cerr << line << std::flush;
    } catch (...) {
    }
  }
  detail::abort_running_mpi(exit_code);
  std::_Exit(exit_code);
}

namespace detail {
void throw_bad_process_index(const State& state, int index, bool local) {
  const int limit = local ? state.num_local_processes() : state.num_processes();
  throw ConfigError(std::string(local ? "on_local_process(" : "on_process(") + std::to_string(index) + "): no such " +
                    (local ? "local process" : "process") + "; valid indices are 0.." + std::to_string(limit - 1) +
                    ".");
}
}  // namespace detail

}  // namespace accelerate
