// Reading and writing HDF5 attributes of the kinds a checkpoint uses.
#pragma once

#include <hdf5.h>

#include <cstddef>
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

/// Largest attribute read_attribute accepts: values (one per rank at most in
/// a checkpoint) and bytes of one value (a string).
inline constexpr hssize_t kMaxAttributeElements = hssize_t{1} << 24;
inline constexpr std::size_t kMaxAttributeBytes = std::size_t{1} << 24;

/// The attribute's value, or nullopt when `object` has no such attribute.
/// Integers of any width come back as int64, floats as double, the bool enum as bool.
/// Throws Hdf5Error when its declared size exceeds those limits (a damaged file).
std::optional<AttributeValue> read_attribute(hid_t object, std::string_view name, std::string_view where);

/// The value when it is there and a T, else `fallback`.
template <typename T>
T attribute_or(const std::optional<AttributeValue>& value, T fallback) {
  if (value && std::holds_alternative<T>(*value)) return std::get<T>(*value);
  return fallback;
}

}  // namespace accelerate::checkpoint::detail
