// Streams of samples (LibTorch's StreamDataset, Accelerate's iterable
// datasets): datasets read in order, in chunks, without indices or a length.
#pragma once

#include <torch/data/example.h>

#include <concepts>
#include <cstddef>
#include <string>
#include <vector>

#include "accelerate/data/collate.hpp"

namespace accelerate {

/// A stream: get_batch(n) returns the next samples, at most n of them, and an
/// empty vector once the stream is over (LibTorch's
/// torch::data::datasets::StreamDataset<Self> qualifies). A reset() member,
/// when present, restarts the stream; the loaders call it at the start of
/// every pass after the first. A stream is read from one thread at a time.
template <class D>
concept StreamDataset = requires(D& dataset, std::size_t n) {
  { dataset.get_batch(n) } -> std::convertible_to<std::vector<torch::data::Example<>>>;
};

namespace detail {

/// Restarts the stream for a new pass when it can be restarted.
template <StreamDataset D>
void restart_stream(D& dataset) {
  if constexpr (requires { dataset.reset(); }) dataset.reset();
}

/// Reads the next `n` samples, or fewer only when the stream ends.
template <StreamDataset D>
std::vector<torch::data::Example<>> read_samples(D& dataset, std::size_t n) {
  std::vector<torch::data::Example<>> samples;
  samples.reserve(n);
  while (samples.size() < n) {
    std::vector<torch::data::Example<>> chunk = dataset.get_batch(n - samples.size());
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
