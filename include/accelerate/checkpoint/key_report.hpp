// Comparing the entries a program expects with those a checkpoint holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace accelerate::checkpoint {

/// What a tensor entry looks like, without the data.
struct TensorSpec {
  std::string name;
  std::string dtype;  // "float32", "bfloat16", … (see docs/checkpoint-format.md)
  std::vector<std::int64_t> shape;
};

struct KeyMismatch {
  std::string name;
  TensorSpec expected;
  TensorSpec found;
};

/// Result of matching expected keys against a checkpoint (strict or not).
struct KeyReport {
  std::vector<std::string> missing;     // expected, not in the checkpoint
  std::vector<std::string> unexpected;  // in the checkpoint, not expected
  std::vector<KeyMismatch> mismatched;  // in both, different shape or dtype
  [[nodiscard]] bool empty() const noexcept { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  /// Multi-line listing of every problem (empty string when there is none).
  [[nodiscard]] std::string to_string() const;
};

/// Matches by name. Names compare exactly; shapes and dtypes must be equal.
KeyReport compare_keys(const std::vector<TensorSpec>& expected, const std::vector<TensorSpec>& found);

std::string shape_to_string(const std::vector<std::int64_t>& shape);

}  // namespace accelerate::checkpoint
