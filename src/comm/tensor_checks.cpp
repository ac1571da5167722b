#include "comm/tensor_checks.hpp"

#include <sstream>

#include "accelerate/error.hpp"

namespace accelerate::detail {

std::string shape_of(const at::Tensor& tensor) {
  std::ostringstream out;
  out << c10::toString(tensor.scalar_type()) << tensor.sizes();
  return out.str();
}

void check_defined(const at::Tensor& tensor, const char* operation, const char* role) {
  if (!tensor.defined()) throw ConfigError(std::string(operation) + ": the " + role + " tensor is undefined.");
}

void check_pair(const at::Tensor& output, const at::Tensor& input, const char* operation) {
  check_defined(input, operation, "input");
  check_defined(output, operation, "output");
  if (output.device() != input.device()) {
    throw ConfigError(std::string(operation) + ": the output tensor is on " + output.device().str() +
                      " but the input is on " + input.device().str() + "; put both on one device.");
  }
  check_same_dtype(output, input, operation);
}

void check_root(int root, int size, const std::string& group, const char* operation) {
  if (root < 0 || root >= size) {
    throw ConfigError(std::string(operation) + ": root " + std::to_string(root) + " is not a rank of group '" + group +
                      "' (ranks 0.." + std::to_string(size - 1) + ").");
  }
}

void check_same_dtype(const at::Tensor& output, const at::Tensor& input, const char* operation) {
  if (output.scalar_type() != input.scalar_type()) {
    throw ConfigError(std::string(operation) + ": output dtype " + std::string(c10::toString(output.scalar_type())) +
                      " differs from input dtype " + std::string(c10::toString(input.scalar_type())) +
                      "; allocate the output with the input's dtype.");
  }
}

void check_numel(const at::Tensor& tensor, int64_t expected, const char* operation, const char* role,
                 const std::string& rule) {
  if (tensor.numel() != expected) {
    throw ConfigError(std::string(operation) + ": the " + role + " tensor " + shape_of(tensor) + " has " +
                      std::to_string(tensor.numel()) + " elements but " + std::to_string(expected) + " are needed (" +
                      rule + ").");
  }
}

}  // namespace accelerate::detail
