#include "accelerate/runtime/split_tensor.hpp"

#include <ATen/ATen.h>

#include "accelerate/error.hpp"
#include "accelerate/runtime/process_control.hpp"

namespace accelerate {

at::Tensor split_between_processes(const State& state, const at::Tensor& inputs, bool apply_padding) {
  if (inputs.dim() == 0) {
    throw ConfigError(detail::where() +
                      " split_between_processes: cannot split a 0-d tensor; pass a tensor whose first "
                      "dimension indexes the items to distribute.");
  }
  const auto length = static_cast<std::size_t>(inputs.size(0));
  const ProcessSlice slice = slice_for_process(length, state.num_processes(), state.process_index());
  at::Tensor result = inputs.slice(0, static_cast<int64_t>(slice.begin), static_cast<int64_t>(slice.end));
  if (!apply_padding || length == 0 || result.size(0) == static_cast<int64_t>(slice.padded_size)) {
    return result;
  }
  const at::Tensor filler =
      result.size(0) > 0 ? result.narrow(0, result.size(0) - 1, 1) : inputs.narrow(0, inputs.size(0) - 1, 1);
  const int64_t missing = static_cast<int64_t>(slice.padded_size) - result.size(0);
  std::vector<int64_t> repeats(static_cast<std::size_t>(inputs.dim()), 1);
  repeats[0] = missing;
  return at::cat({result, filler.repeat(repeats)}, 0);
}

}  // namespace accelerate
