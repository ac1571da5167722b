// Validation of dataset and group names inside a checkpoint file.
#pragma once

#include <filesystem>
#include <string_view>

namespace accelerate::checkpoint::detail {

/// Throws ConfigError unless `name` is a relative HDF5 path: non-empty parts
/// separated by single '/', no leading or trailing '/', no "." or "..".
void validate_dataset_name(std::string_view name, const std::filesystem::path& file);

}  // namespace accelerate::checkpoint::detail
