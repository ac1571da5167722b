// Argument checks of the collectives, with messages in one voice: operation,
// role of the tensor, what is wrong, what is expected. ProcessGroup makes the
// ones every backend needs once, before it routes a call (backend.hpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace accelerate::detail {

/// "Float[4, 1024]"
std::string shape_of(const at::Tensor& tensor);

/// ConfigError unless `tensor` is defined.
void check_defined(const at::Tensor& tensor, const char* operation, const char* role);

/// ConfigError unless both are defined, on one device, of one dtype.
void check_pair(const at::Tensor& output, const at::Tensor& input, const char* operation);

/// ConfigError unless `root` is a rank of the group of `size` ranks named `group`.
void check_root(int root, int size, const std::string& group, const char* operation);

/// ConfigError unless output and input have the same dtype.
void check_same_dtype(const at::Tensor& output, const at::Tensor& input, const char* operation);

/// ConfigError unless `tensor` has `expected` elements; `rule` says why.
void check_numel(const at::Tensor& tensor, int64_t expected, const char* operation, const char* role,
                 const std::string& rule);

}  // namespace accelerate::detail
