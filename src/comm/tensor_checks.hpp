// Argument checks shared by the backends, with messages in one voice:
// operation, role of the tensor, what is wrong, what is expected.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace accelerate::detail {

/// "Float[4, 1024]"
std::string shape_of(const at::Tensor& tensor);

/// ConfigError unless output and input have the same dtype.
void check_same_dtype(const at::Tensor& output, const at::Tensor& input, const char* operation);

/// ConfigError unless `tensor` has `expected` elements; `rule` says why.
void check_numel(const at::Tensor& tensor, int64_t expected, const char* operation, const char* role,
                 const std::string& rule);

}  // namespace accelerate::detail
