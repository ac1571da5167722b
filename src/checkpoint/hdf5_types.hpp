// How tensor dtypes are stored: the HDF5 file type of each supported
// torch dtype, and the dtype names written in each dataset's `dtype`
// attribute (which is authoritative on load). See docs/checkpoint-format.md.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>
#include <string_view>

#include "checkpoint/hdf5_handle.hpp"

namespace accelerate::checkpoint::detail {

/// "float32", "bfloat16", "bool", … (the torch name without the prefix).
std::string_view dtype_name(c10::ScalarType type);

/// Inverse of dtype_name; throws ConfigError on an unknown name, naming `where`.
c10::ScalarType dtype_from_name(std::string_view name, std::string_view where);

/// HDF5 type describing the in-memory and on-disk bytes of `type` (little
/// endian; the file is written and read without conversion). Throws
/// ConfigError for dtypes that cannot be stored (complex, quantized…).
Datatype hdf5_type_of(c10::ScalarType type, std::string_view dataset);

/// The enum type used for booleans (h5py's convention: int8 FALSE=0, TRUE=1).
Datatype hdf5_bool_type();

}  // namespace accelerate::checkpoint::detail
