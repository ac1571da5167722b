// Running code on some processes only, and in a given order (seeds:
// main_process_first, on_main_process, split_between_processes, …).
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "accelerate/runtime/state.hpp"

namespace accelerate {

/// RAII: the main process runs the guarded scope first; the others wait at
/// construction until it leaves the scope, then run it. Typical use: the
/// main process downloads or preprocesses, the others read the result.
///
///   { auto first = main_process_first(state); prepare_dataset(); }
///
/// Every process of the group must create the guard (it is collective).
class [[nodiscard]] MainProcessFirst {
 public:
  enum class Scope { Global, Node };
  MainProcessFirst(const State& state, Scope scope);
  ~MainProcessFirst() noexcept(false);
  MainProcessFirst(const MainProcessFirst&) = delete;
  MainProcessFirst& operator=(const MainProcessFirst&) = delete;

 private:
  void barrier() const;
  const State& state_;
  Scope scope_;
  bool is_first_;
  int uncaught_ = 0;
};

/// The main process of the job goes first.
inline MainProcessFirst main_process_first(const State& state) {
  return MainProcessFirst(state, MainProcessFirst::Scope::Global);
}

/// The main process of each node goes first; only that node's processes wait
/// (a node-local barrier, so nodes do not wait for each other).
inline MainProcessFirst local_main_process_first(const State& state) {
  return MainProcessFirst(state, MainProcessFirst::Scope::Node);
}

/// Calls `fn()` on the main process only; returns whether it ran.
template <typename Fn>
bool on_main_process(const State& state, Fn&& fn) {
  if (!state.is_main_process()) return false;
  std::forward<Fn>(fn)();
  return true;
}

/// Calls `fn()` on the main process of each node only.
template <typename Fn>
bool on_local_main_process(const State& state, Fn&& fn) {
  if (!state.is_local_main_process()) return false;
  std::forward<Fn>(fn)();
  return true;
}

/// Calls `fn()` on the last process only.
template <typename Fn>
bool on_last_process(const State& state, Fn&& fn) {
  if (!state.is_last_process()) return false;
  std::forward<Fn>(fn)();
  return true;
}

/// Calls `fn()` on process `index` only; throws ConfigError when `index` is
/// not a rank of the job.
template <typename Fn>
bool on_process(const State& state, int index, Fn&& fn);

/// Calls `fn()` on local process `local_index` of every node only.
template <typename Fn>
bool on_local_process(const State& state, int local_index, Fn&& fn);

/// The half-open range [begin, end) of `length` items that process `index`
/// of `count` receives: consecutive blocks, the first `length % count`
/// processes one item longer (Accelerate's split_between_processes).
struct ProcessSlice {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t padded_size = 0;  ///< the longest slice's size: what apply_padding pads to
};

ProcessSlice slice_for_process(std::size_t length, int count, int index);

/// This process's share of `inputs`, as Accelerate's split_between_processes:
/// a process past the end of short inputs (fewer items than processes) gets
/// the last item. With `apply_padding`, every process gets the same number of
/// items: short slices repeat their last item, so collectives over the
/// results line up. Use gather_for_metrics-style truncation to drop the
/// padding.
template <typename T>
std::vector<T> split_between_processes(const State& state, const std::vector<T>& inputs, bool apply_padding = false) {
  if (inputs.empty()) return {};
  const ProcessSlice slice = slice_for_process(inputs.size(), state.num_processes(), state.process_index());
  std::vector<T> result;
  if (slice.begin >= inputs.size()) {
    result.push_back(inputs.back());
  } else {
    result.assign(inputs.begin() + static_cast<std::ptrdiff_t>(slice.begin),
                  inputs.begin() + static_cast<std::ptrdiff_t>(slice.end));
  }
  if (apply_padding) {
    const T filler = result.back();
    result.resize(slice.padded_size, filler);
  }
  return result;
}

namespace detail {
/// Throws ConfigError unless every value of a split map has the first
/// value's length; `lengths` holds each key and its value's length.
void check_split_lengths(const std::vector<std::pair<std::string_view, std::size_t>>& lengths);
}  // namespace detail

/// Every value of `inputs` split as above, with the same slice for each, so
/// the values stay aligned (Accelerate's split of a dict). Every value must
/// have the same length: ConfigError naming the keys otherwise.
template <typename T>
std::map<std::string, std::vector<T>> split_between_processes(const State& state,
                                                              const std::map<std::string, std::vector<T>>& inputs,
                                                              bool apply_padding = false) {
  std::vector<std::pair<std::string_view, std::size_t>> lengths;
  for (const auto& [key, value] : inputs) lengths.emplace_back(key, value.size());
  detail::check_split_lengths(lengths);
  std::map<std::string, std::vector<T>> result;
  for (const auto& [key, value] : inputs) result.emplace(key, split_between_processes(state, value, apply_padding));
  return result;
}

/// Ends the whole job from any rank: prints `message` with this rank's
/// identity to stderr, then MPI_Abort on MPI_COMM_WORLD. Use it where one
/// rank cannot continue and the others would otherwise wait forever.
/// Ranks that call it with the same message at about the same time (an error
/// every rank raised) print it once: rank 0 gathers the messages over a
/// communicator the newest State set up for this, even after that State was
/// destroyed, and prints each distinct one with the list of ranks that raised
/// it. A rank whose message rank 0 does not take prints its own. Either way
/// the abort follows within 2 s (docs/troubleshooting.md).
[[noreturn]] void abort_all(std::string_view message, int exit_code = 1) noexcept;

namespace detail {
[[noreturn]] void throw_bad_process_index(const State& state, int index, bool local);
}  // namespace detail

template <typename Fn>
bool on_process(const State& state, int index, Fn&& fn) {
  if (index < 0 || index >= state.num_processes()) detail::throw_bad_process_index(state, index, false);
  if (state.process_index() != index) return false;
  std::forward<Fn>(fn)();
  return true;
}

template <typename Fn>
bool on_local_process(const State& state, int local_index, Fn&& fn) {
  if (local_index < 0 || local_index >= state.num_local_processes()) {
    detail::throw_bad_process_index(state, local_index, true);
  }
  if (state.local_process_index() != local_index) return false;
  std::forward<Fn>(fn)();
  return true;
}

}  // namespace accelerate
