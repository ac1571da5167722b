#include "checkpoint/attributes.hpp"

#include <string>
#include <type_traits>

#include "accelerate/error.hpp"
#include "checkpoint/hdf5_handle.hpp"
#include "checkpoint/hdf5_types.hpp"

namespace accelerate::checkpoint::detail {
namespace {

void write_raw(hid_t object, std::string_view name, hid_t file_type, hid_t memory_type, hid_t space, const void* data,
               std::string_view where) {
  const std::string key(name);
  if (ACCELERATE_HDF5_CHECK(H5Aexists(object, key.c_str()), where) > 0) {
    ACCELERATE_HDF5_CHECK(H5Adelete(object, key.c_str()), where);
  }
  Attribute attribute(H5Acreate2(object, key.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT), where);
  ACCELERATE_HDF5_CHECK(H5Awrite(attribute.get(), memory_type, data), where);
}

Dataspace space_for(std::size_t count, bool scalar, std::string_view where) {
  if (scalar) return Dataspace(H5Screate(H5S_SCALAR), where);
  const hsize_t dims[1] = {static_cast<hsize_t>(count)};
  return Dataspace(H5Screate_simple(1, dims, nullptr), where);
}

}  // namespace

void write_u32_attribute(hid_t object, std::string_view name, std::uint32_t value, std::string_view where) {
  Dataspace space = space_for(1, true, where);
  write_raw(object, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, space.get(), &value, where);
}

void write_attribute(hid_t object, std::string_view name, const AttributeValue& value, std::string_view where) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          Datatype type = hdf5_bool_type();
          const std::int8_t byte = v ? 1 : 0;
          Dataspace space = space_for(1, true, where);
          write_raw(object, name, type.get(), type.get(), space.get(), &byte, where);
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          Dataspace space = space_for(1, true, where);
          write_raw(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space.get(), &v, where);
        } else if constexpr (std::is_same_v<T, double>) {
          Dataspace space = space_for(1, true, where);
          write_raw(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space.get(), &v, where);
        } else if constexpr (std::is_same_v<T, std::string>) {
          // Fixed-length UTF-8 string of the exact size (h5dump, h5py read it as text).
          Datatype type(H5Tcopy(H5T_C_S1), where);
          ACCELERATE_HDF5_CHECK(H5Tset_size(type.get(), v.empty() ? 1 : v.size()), where);
          ACCELERATE_HDF5_CHECK(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), where);
          ACCELERATE_HDF5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8), where);
          Dataspace space = space_for(1, true, where);
          const char empty = '\0';
          write_raw(object, name, type.get(), type.get(), space.get(), v.empty() ? &empty : v.data(), where);
        } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
          Dataspace space = space_for(v.size(), false, where);
          write_raw(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space.get(), v.data(), where);
        } else {
          Dataspace space = space_for(v.size(), false, where);
          write_raw(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space.get(), v.data(), where);
        }
      },
      value);
}

std::optional<AttributeValue> read_attribute(hid_t object, std::string_view name, std::string_view where) {
  const std::string key(name);
  if (ACCELERATE_HDF5_CHECK(H5Aexists(object, key.c_str()), where) <= 0) return std::nullopt;
  Attribute attribute(H5Aopen(object, key.c_str(), H5P_DEFAULT), where);
  Datatype type(H5Aget_type(attribute.get()), where);
  Dataspace space(H5Aget_space(attribute.get()), where);
  const hssize_t count = ACCELERATE_HDF5_CHECK(H5Sget_simple_extent_npoints(space.get()), where);
  const bool scalar = ACCELERATE_HDF5_CHECK(H5Sget_simple_extent_ndims(space.get()), where) == 0;
  // Attributes this library writes hold one value, or one per rank; a
  // damaged header may declare anything, so sizes are checked before use.
  const std::size_t value_size = H5Tget_size(type.get());
  if ((scalar && count != 1) || count > kMaxAttributeElements || value_size > kMaxAttributeBytes) {
    throw Hdf5Error("checkpoint: attribute '" + key + "' of '" + std::string(where) + "' declares " +
                    std::to_string(count) + " values of " + std::to_string(value_size) +
                    " bytes, which no checkpoint holds: the file is damaged.");
  }
  switch (H5Tget_class(type.get())) {
    case H5T_STRING: {
      if (H5Tis_variable_str(type.get()) > 0) {
        char* text = nullptr;
        Datatype memory(H5Tcopy(H5T_C_S1), where);
        ACCELERATE_HDF5_CHECK(H5Tset_size(memory.get(), H5T_VARIABLE), where);
        ACCELERATE_HDF5_CHECK(H5Aread(attribute.get(), memory.get(), &text), where);
        std::string result = text != nullptr ? text : "";
        H5free_memory(text);
        return AttributeValue{std::move(result)};
      }
      std::string text(H5Tget_size(type.get()), '\0');
      ACCELERATE_HDF5_CHECK(H5Aread(attribute.get(), type.get(), text.data()), where);
      text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
      return AttributeValue{std::move(text)};
    }
    case H5T_ENUM: {
      std::int8_t byte = 0;
      Datatype memory = hdf5_bool_type();
      ACCELERATE_HDF5_CHECK(H5Aread(attribute.get(), memory.get(), &byte), where);
      return AttributeValue{byte != 0};
    }
    case H5T_INTEGER: {
      std::vector<std::int64_t> values(static_cast<std::size_t>(count));
      ACCELERATE_HDF5_CHECK(H5Aread(attribute.get(), H5T_NATIVE_INT64, values.data()), where);
      if (scalar) return AttributeValue{values.at(0)};
      return AttributeValue{std::move(values)};
    }
    case H5T_FLOAT: {
      std::vector<double> values(static_cast<std::size_t>(count));
      ACCELERATE_HDF5_CHECK(H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, values.data()), where);
      if (scalar) return AttributeValue{values.at(0)};
      return AttributeValue{std::move(values)};
    }
    default: break;
  }
  throw Hdf5Error("checkpoint: attribute '" + key + "' of '" + std::string(where) +
                  "' has a type this version does not read.");
}

}  // namespace accelerate::checkpoint::detail
