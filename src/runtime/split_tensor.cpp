#include "accelerate/runtime/split_tensor.hpp"

#include <ATen/ATen.h>

#include "accelerate/error.hpp"
#include "accelerate/runtime/process_control.hpp"

namespace accelerate {

at::Tensor split_between_processes(const State& state, const at::Tensor& inputs, bool apply_padding) {
  if (inputs.dim() == 0) {
    throw ConfigError(
        "split_between_processes: cannot split a 0-d tensor; pass a tensor whose first "
        "dimension indexes the items to distribute.");
  }
  const auto length = static_cast<std::size_t>(inputs.size(0));
  if (length == 0) return inputs;
  const ProcessSlice slice = slice_for_process(length, state.num_processes(), state.process_index());
  // Past the end of short inputs: the last row, as Accelerate.
  at::Tensor result = slice.begin >= length
                          ? inputs.narrow(0, inputs.size(0) - 1, 1)
                          : inputs.slice(0, static_cast<int64_t>(slice.begin), static_cast<int64_t>(slice.end));
  if (!apply_padding || result.size(0) == static_cast<int64_t>(slice.padded_size)) return result;
  const at::Tensor filler = result.narrow(0, result.size(0) - 1, 1);
  const int64_t missing = static_cast<int64_t>(slice.padded_size) - result.size(0);
  std::vector<int64_t> repeats(static_cast<std::size_t>(inputs.dim()), 1);
  repeats[0] = missing;
  return at::cat({result, filler.repeat(repeats)}, 0);
}

std::map<std::string, at::Tensor> split_between_processes(const State& state,
                                                          const std::map<std::string, at::Tensor>& inputs,
                                                          bool apply_padding) {
  std::vector<std::pair<std::string_view, std::size_t>> lengths;
  for (const auto& [key, value] : inputs) {
    if (value.dim() == 0) {
      throw ConfigError("split_between_processes: the value of '" + key +
                        "' is a 0-d tensor; every value must have a first dimension to split.");
    }
    lengths.emplace_back(key, static_cast<std::size_t>(value.size(0)));
  }
  detail::check_split_lengths(lengths);
  std::map<std::string, at::Tensor> result;
  for (const auto& [key, value] : inputs) result.emplace(key, split_between_processes(state, value, apply_padding));
  return result;
}

}  // namespace accelerate
