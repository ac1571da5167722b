// Turning loaded samples into the batches a loader hands out: stacking
// examples along a new first dimension, and placing a batch on its device
// (pinned host memory and asynchronous copies for CUDA).
#pragma once

#include <torch/types.h>
#include <torch/data/example.h>

#include <string>
#include <string_view>
#include <vector>

namespace accelerate {
namespace detail {

/// Throws ConfigError "<where> <component>: <what>".
[[noreturn]] void loader_error(std::string_view component, const std::string& what);

/// Stacks the data and the targets of the examples along a new first
/// dimension. Throws ConfigError naming the first example whose shape or
/// dtype differs from the first one's.
torch::data::Example<> stack_examples(std::vector<torch::data::Example<>>& examples);

/// The batch on `device`. For a CUDA device, pin_memory first moves host
/// tensors into page-locked memory and non_blocking lets the copy overlap
/// the host; on the CPU the batch is returned as it is.
torch::data::Example<> place_batch(torch::data::Example<> batch, const torch::Device& device, bool non_blocking,
                                   bool pin_memory);

}  // namespace detail
}  // namespace accelerate
