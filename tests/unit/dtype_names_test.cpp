// detail::dtype_names: the one table of dtype spellings. Every dtype each
// format holds goes to its name and back; names and dtypes a format lacks
// are refused, and the checkpoint reader turns an unknown name into its
// error.
#include "detail/dtype_names.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "accelerate/config.hpp"
#include "common/test_helpers.hpp"

#if ACCELERATE_HAVE_HDF5
#include "checkpoint/hdf5_types.hpp"
#endif

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {
namespace {

using accelerate::detail::describe_dtype;
using accelerate::detail::dtype_from_name;
using accelerate::detail::dtype_name;
using accelerate::detail::DtypeFormat;
using Spellings = std::vector<std::pair<c10::ScalarType, std::string>>;

// The spellings written on disk: changing one breaks files already written.
const Spellings kCheckpointNames{{c10::ScalarType::Float, "float32"}, {c10::ScalarType::Double, "float64"},
                                 {c10::ScalarType::Half, "float16"},  {c10::ScalarType::BFloat16, "bfloat16"},
                                 {c10::ScalarType::Char, "int8"},     {c10::ScalarType::Byte, "uint8"},
                                 {c10::ScalarType::Short, "int16"},   {c10::ScalarType::Int, "int32"},
                                 {c10::ScalarType::Long, "int64"},    {c10::ScalarType::Bool, "bool"}};
const Spellings kComplexNames{{c10::ScalarType::ComplexFloat, "complex64"},
                              {c10::ScalarType::ComplexDouble, "complex128"}};
const Spellings kSafetensorsCodes{{c10::ScalarType::Float, "F32"}, {c10::ScalarType::Double, "F64"},
                                  {c10::ScalarType::Half, "F16"},  {c10::ScalarType::BFloat16, "BF16"},
                                  {c10::ScalarType::Char, "I8"},   {c10::ScalarType::Byte, "U8"},
                                  {c10::ScalarType::Short, "I16"}, {c10::ScalarType::Int, "I32"},
                                  {c10::ScalarType::Long, "I64"},  {c10::ScalarType::Bool, "BOOL"}};

void expect_round_trips(const Spellings& spellings, DtypeFormat format) {
  for (const auto& [type, name] : spellings) {
    EXPECT_EQ(dtype_name(type, format), name) << c10::toString(type);
    EXPECT_EQ(dtype_from_name(name, format), type) << name;
  }
}

TEST(DtypeNames, EveryDtypeOfEachFormatGoesToItsNameAndBack) {
  expect_round_trips(kCheckpointNames, DtypeFormat::checkpoint);
  expect_round_trips(kSafetensorsCodes, DtypeFormat::safetensors);
  expect_round_trips(kCheckpointNames, DtypeFormat::offload);
  expect_round_trips(kComplexNames, DtypeFormat::offload);
}

TEST(DtypeNames, DtypesAFormatLacksHaveNoName) {
  for (const auto& [type, name] : kComplexNames) {
    EXPECT_FALSE(dtype_name(type, DtypeFormat::checkpoint)) << name;
    EXPECT_FALSE(dtype_name(type, DtypeFormat::safetensors)) << name;
  }
  for (const DtypeFormat format : {DtypeFormat::checkpoint, DtypeFormat::offload, DtypeFormat::safetensors}) {
    EXPECT_FALSE(dtype_name(c10::ScalarType::QInt8, format));
    EXPECT_FALSE(dtype_name(c10::ScalarType::ComplexHalf, format));
  }
}

TEST(DtypeNames, UnknownNamesAreRefused) {
  // Another format's spelling, another case, a numpy dtype no format holds, nothing.
  for (const char* name : {"F32", "Float32", "FLOAT32", "float128", "float8", "complex64", ""}) {
    EXPECT_FALSE(dtype_from_name(name, DtypeFormat::checkpoint)) << name;
  }
  for (const char* name : {"float32", "f32", "F8_E4M3", "C64", "BOOL ", ""}) {
    EXPECT_FALSE(dtype_from_name(name, DtypeFormat::safetensors)) << name;
  }
  for (const char* name : {"F32", "complex32", "float8", "object", ""}) {
    EXPECT_FALSE(dtype_from_name(name, DtypeFormat::offload)) << name;
  }
}

TEST(DtypeNames, MessagesNameEveryDtype) {
  EXPECT_EQ(describe_dtype(c10::ScalarType::BFloat16), "bfloat16");
  // Outside the checkpoint's names, LibTorch's own, as the messages always said.
  EXPECT_EQ(describe_dtype(c10::ScalarType::ComplexFloat), "ComplexFloat");
  EXPECT_EQ(describe_dtype(c10::ScalarType::QInt8), "QInt8");
}

#if ACCELERATE_HAVE_HDF5
TEST(DtypeNames, TheCheckpointReaderNamesAnUnknownDtype) {
  namespace checkpoint = accelerate::checkpoint::detail;
  EXPECT_EQ(checkpoint::dtype_from_name("int16", "model/w"), c10::ScalarType::Short);
  const std::string message =
      accelerate::testing::error_of([] { (void)checkpoint::dtype_from_name("float8", "model/w"); });
  EXPECT_NE(message.find("dataset 'model/w' has dtype 'float8', which this version cannot read"), std::string::npos)
      << message;
  EXPECT_EQ(checkpoint::dtype_name(c10::ScalarType::ComplexDouble), "ComplexDouble");
}
#endif

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
