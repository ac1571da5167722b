// Streams of samples (LibTorch's StreamDataset, Accelerate's iterable
// datasets): datasets read in order, in chunks, without indices or a length.
#pragma once

#include <concepts>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "accelerate/data/collate.hpp"

namespace accelerate {

namespace detail {
template <class D>
using StreamChunk = std::remove_cvref_t<decltype(std::declval<D&>().get_batch(std::size_t{}))>;
}  // namespace detail

/// A stream: get_batch(n) returns the next samples as a std::vector, at most
/// n of them, and an empty vector once the stream is over (LibTorch's
/// torch::data::datasets::StreamDataset<Self> qualifies). The samples are
/// data/target examples, string-keyed maps of tensors, or anything the
/// loader's collate function takes; they must be copyable (the first round
/// completes the last). A reset() member, when present, restarts the stream;
/// the loaders call it at the start of every pass after the first. A stream
/// is read from one thread at a time.
template <class D>
concept StreamDataset = requires(D& dataset, std::size_t n) {
  typename detail::StreamChunk<D>::value_type;
  requires std::same_as<detail::StreamChunk<D>, std::vector<typename detail::StreamChunk<D>::value_type>>;
  requires std::copyable<typename detail::StreamChunk<D>::value_type>;
};

/// The sample type of a stream.
template <StreamDataset D>
using StreamSampleOf = typename detail::StreamChunk<D>::value_type;

namespace detail {

/// Restarts the stream for a new pass when it can be restarted.
template <StreamDataset D>
void restart_stream(D& dataset) {
  if constexpr (requires { dataset.reset(); }) dataset.reset();
}

/// Reads the next `n` samples, or fewer only when the stream ends.
template <StreamDataset D>
std::vector<StreamSampleOf<D>> read_samples(D& dataset, std::size_t n) {
  std::vector<StreamSampleOf<D>> samples;
  samples.reserve(n);
  while (samples.size() < n) {
    std::vector<StreamSampleOf<D>> chunk = dataset.get_batch(n - samples.size());
    if (chunk.empty()) break;
    if (chunk.size() > n - samples.size()) {
      loader_error("stream dataset", "get_batch(" + std::to_string(n - samples.size()) + ") returned " +
                                         std::to_string(chunk.size()) +
                                         " samples; a stream must return at most the number asked for.");
    }
    for (auto& sample : chunk) samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace detail
}  // namespace accelerate
