#include "checkpoint/hdf5_types.hpp"

#include "accelerate/error.hpp"
#include "detail/dtype_names.hpp"

namespace accelerate::checkpoint::detail {
namespace {

// A 16-bit IEEE-style float: sign at bit 15, `exponent_bits` of exponent
// above `mantissa_bits` of mantissa. float16 is (5, 10), bfloat16 is (8, 7).
Datatype small_float(std::size_t exponent_bits, std::size_t mantissa_bits, std::string_view dataset) {
  Datatype type(H5Tcopy(H5T_IEEE_F32LE), dataset);
  const hid_t id = type.get();
  // Order matters: shrink the fields before the precision and size.
  ACCELERATE_HDF5_CHECK(H5Tset_fields(id, 15, mantissa_bits, exponent_bits, 0, mantissa_bits), dataset);
  ACCELERATE_HDF5_CHECK(H5Tset_precision(id, 16), dataset);
  ACCELERATE_HDF5_CHECK(H5Tset_size(id, 2), dataset);
  ACCELERATE_HDF5_CHECK(H5Tset_ebias(id, (std::size_t{1} << (exponent_bits - 1)) - 1), dataset);
  return type;
}

Datatype copy_of(hid_t predefined, std::string_view dataset) { return Datatype(H5Tcopy(predefined), dataset); }

}  // namespace

std::string_view dtype_name(c10::ScalarType type) { return accelerate::detail::describe_dtype(type); }

c10::ScalarType dtype_from_name(std::string_view name, std::string_view where) {
  using accelerate::detail::DtypeFormat;
  if (const auto type = accelerate::detail::dtype_from_name(name, DtypeFormat::checkpoint)) return *type;
  throw ConfigError(accelerate::detail::where() + " checkpoint: dataset '" + std::string(where) + "' has dtype '" +
                    std::string(name) +
                    "', which this version cannot read. Use a newer Accelerate-HPC or re-save the checkpoint.");
}

Datatype hdf5_bool_type() {
  Datatype type(H5Tenum_create(H5T_NATIVE_INT8), "bool enum");
  const std::int8_t no = 0;
  const std::int8_t yes = 1;
  ACCELERATE_HDF5_CHECK(H5Tenum_insert(type.get(), "FALSE", &no), "bool enum");
  ACCELERATE_HDF5_CHECK(H5Tenum_insert(type.get(), "TRUE", &yes), "bool enum");
  return type;
}

Datatype hdf5_type_of(c10::ScalarType type, std::string_view dataset) {
  switch (type) {
    case c10::ScalarType::Float: return copy_of(H5T_IEEE_F32LE, dataset);
    case c10::ScalarType::Double: return copy_of(H5T_IEEE_F64LE, dataset);
    case c10::ScalarType::Half: return small_float(5, 10, dataset);
    case c10::ScalarType::BFloat16: return small_float(8, 7, dataset);
    case c10::ScalarType::Char: return copy_of(H5T_STD_I8LE, dataset);
    case c10::ScalarType::Byte: return copy_of(H5T_STD_U8LE, dataset);
    case c10::ScalarType::Short: return copy_of(H5T_STD_I16LE, dataset);
    case c10::ScalarType::Int: return copy_of(H5T_STD_I32LE, dataset);
    case c10::ScalarType::Long: return copy_of(H5T_STD_I64LE, dataset);
    case c10::ScalarType::Bool: return hdf5_bool_type();
    default: break;
  }
  throw ConfigError(accelerate::detail::where() + " checkpoint: tensor '" + std::string(dataset) + "' has dtype " +
                    c10::toString(type) +
                    ", which checkpoints cannot store. Convert it to a real floating-point or integer dtype "
                    "before saving (e.g. torch::view_as_real for complex tensors).");
}

}  // namespace accelerate::checkpoint::detail
