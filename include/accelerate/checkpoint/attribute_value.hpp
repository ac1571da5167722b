// Small values stored as HDF5 attributes next to the tensors: scalars,
// strings (JSON text for structured objects) and numeric lists.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace accelerate::checkpoint {

using AttributeValue =
    std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>, std::vector<double>>;

}  // namespace accelerate::checkpoint
