#include "comm/tensor_checks.hpp"

#include <sstream>

#include "accelerate/error.hpp"

namespace accelerate::detail {

std::string shape_of(const at::Tensor& tensor) {
  std::ostringstream out;
  out << c10::toString(tensor.scalar_type()) << tensor.sizes();
  return out.str();
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
