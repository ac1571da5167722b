#include "detail/dtype_names.hpp"

#include <array>

namespace accelerate::detail {
namespace {

struct DtypeRow {
  c10::ScalarType type;
  std::string_view numpy_name;        // the checkpoint and offload spelling
  std::string_view safetensors_code;  // empty: safetensors files of ours do not hold it
  bool offload_only;                  // complex: only offload folders hold it
};

// Only dtypes LibTorch 1.13 already has: the library builds against 1.13 and 2.x.
constexpr std::array kDtypeRows{
    DtypeRow{c10::ScalarType::Float, "float32", "F32", false},
    DtypeRow{c10::ScalarType::Double, "float64", "F64", false},
    DtypeRow{c10::ScalarType::Half, "float16", "F16", false},
    DtypeRow{c10::ScalarType::BFloat16, "bfloat16", "BF16", false},
    DtypeRow{c10::ScalarType::Char, "int8", "I8", false},
    DtypeRow{c10::ScalarType::Byte, "uint8", "U8", false},
    DtypeRow{c10::ScalarType::Short, "int16", "I16", false},
    DtypeRow{c10::ScalarType::Int, "int32", "I32", false},
    DtypeRow{c10::ScalarType::Long, "int64", "I64", false},
    DtypeRow{c10::ScalarType::Bool, "bool", "BOOL", false},
    DtypeRow{c10::ScalarType::ComplexFloat, "complex64", "", true},
    DtypeRow{c10::ScalarType::ComplexDouble, "complex128", "", true},
};

bool format_holds(const DtypeRow& row, DtypeFormat format) {
  switch (format) {
    case DtypeFormat::checkpoint: return !row.offload_only;
    case DtypeFormat::offload: return true;
    case DtypeFormat::safetensors: return !row.safetensors_code.empty();
  }
  return false;
}

std::string_view spelling(const DtypeRow& row, DtypeFormat format) {
  return format == DtypeFormat::safetensors ? row.safetensors_code : row.numpy_name;
}

}  // namespace

std::optional<std::string_view> dtype_name(c10::ScalarType type, DtypeFormat format) {
  for (const DtypeRow& row : kDtypeRows) {
    if (row.type == type && format_holds(row, format)) return spelling(row, format);
  }
  return std::nullopt;
}

std::optional<c10::ScalarType> dtype_from_name(std::string_view name, DtypeFormat format) {
  for (const DtypeRow& row : kDtypeRows) {
    if (format_holds(row, format) && spelling(row, format) == name) return row.type;
  }
  return std::nullopt;
}

std::string_view describe_dtype(c10::ScalarType type) {
  return dtype_name(type, DtypeFormat::checkpoint).value_or(c10::toString(type));
}

}  // namespace accelerate::detail
