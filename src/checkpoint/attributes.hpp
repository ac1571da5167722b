// Reading and writing HDF5 attributes of the kinds a checkpoint uses.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "accelerate/checkpoint/attribute_value.hpp"

namespace accelerate::checkpoint::detail {

/// Creates (or replaces) attribute `name` on `object`. `where` names the
/// object in error messages.
void write_attribute(hid_t object, std::string_view name, const AttributeValue& value, std::string_view where);

/// A 32-bit unsigned attribute (checksums).
void write_u32_attribute(hid_t object, std::string_view name, std::uint32_t value, std::string_view where);

/// The attribute's value, or nullopt when `object` has no such attribute.
/// Integers of any width come back as int64, floats as double, the bool enum as bool.
std::optional<AttributeValue> read_attribute(hid_t object, std::string_view name, std::string_view where);

}  // namespace accelerate::checkpoint::detail
