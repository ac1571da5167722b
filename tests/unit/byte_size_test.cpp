// detail::byte_size: every form of size the library accepts (bytes, powers
// of ten and of two, bits, decimals, the case rules) and every way a text can
// fail to be a size, each error naming the text, the problem and the forms
// accepted.
#include "detail/byte_size.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {
namespace {

using accelerate::detail::read_byte_size;

constexpr std::int64_t kGiB = std::int64_t{1} << 30;
constexpr std::int64_t kTiB = std::int64_t{1} << 40;

void expect_sizes(const std::vector<std::pair<std::string, std::int64_t>>& sizes) {
  for (const auto& [text, bytes] : sizes) {
    const auto size = read_byte_size(text);
    EXPECT_EQ(size.bytes, bytes) << "'" << text << "': " << size.error;
    EXPECT_EQ(size.error, "") << text;
  }
}

void expect_not_sizes(const std::vector<std::string>& texts, const std::string& problem) {
  for (const std::string& text : texts) {
    const auto size = read_byte_size(text);
    EXPECT_FALSE(size.bytes) << "'" << text << "' read as " << size.bytes.value_or(-1);
    EXPECT_EQ(size.error.rfind("'" + text + "' is not a size: " + problem + ". Write a whole or decimal number", 0), 0U)
        << size.error;
    EXPECT_NE(size.error.find("KiB MiB GiB TiB (powers of 2), Kb Mb Gb Tb (bits)"), std::string::npos) << size.error;
  }
}

TEST(ByteSize, BytesAreWholeNumbersWithOrWithoutB) {
  expect_sizes({{"0", 0}, {"123", 123}, {"123B", 123}, {"123b", 123}, {"007", 7}});
}

TEST(ByteSize, DecimalUnitsArePowersOfTen) {
  expect_sizes({{"5KB", 5'000},
                {"5MB", 5'000'000},
                {"5GB", 5'000'000'000},
                {"5TB", 5'000'000'000'000},
                {"5kB", 5'000},  // only a lower-case final b changes the meaning
                {"5gB", 5'000'000'000},
                {"0GB", 0}});
}

TEST(ByteSize, BinaryUnitsArePowersOfTwoInAnyCase) {
  expect_sizes({{"5KiB", 5 * 1024},
                {"5MiB", 5 * 1024 * 1024},
                {"5GiB", 5 * kGiB},
                {"5TiB", 5 * kTiB},
                {"5gib", 5 * kGiB},  // no bits among the binary units, as in Accelerate
                {"5GIB", 5 * kGiB},
                {"5gIb", 5 * kGiB}});
}

TEST(ByteSize, ALowerCaseFinalBAfterADecimalPrefixCountsBits) {
  expect_sizes({{"8Kb", 1'000},
                {"8Mb", 1'000'000},
                {"8Gb", 1'000'000'000},
                {"8Tb", 1'000'000'000'000},
                {"8gb", 1'000'000'000},
                {"8kb", 1'000},
                {"9Kb", 1'125},
                {"1Kb", 125},
                {"1.5Gb", 187'500'000}});
}

TEST(ByteSize, DecimalsAreMultipliedExactlyAndRoundedDown) {
  expect_sizes({{"1.5GB", 1'500'000'000},
                {"1.5GiB", 1'610'612'736},
                {"2.01GB", 2'010'000'000},  // Accelerate's float product says 2'009'999'999
                {".5KB", 500},
                {"5.KB", 5'000},
                {"0.001KB", 1},
                {"0.0009KB", 0},
                {"0.3333KiB", 341},
                {"0.1234567890123456789GiB", 132'560'717}});
}

TEST(ByteSize, TheLargestSizeIsTheLargestInt64) {
  expect_sizes({{"9223372036854775807", INT64_MAX},
                {"8388607TiB", 8'388'607 * kTiB},
                // Bits may count past the byte limit as long as their bytes stay below it.
                {"18446744073709Mb", 2'305'843'009'213'625'000}});
  expect_not_sizes({"9223372036854775808", "18446744073709551616", "8388608TiB", "9223372036854775807.5KB",
                    "18446744073709551615b", "18446744073709552Mb"},
                   "it is more than 9223372036854775807 bytes");
}

TEST(ByteSize, TextsThatAreNotSizesSayWhy) {
  expect_not_sizes({""}, "nothing was given");
  expect_not_sizes({"GB", "abc", "-1", "-1GB", "+5GB", " 5GB", ".", ".GB", "five"}, "it does not start with a number");
  expect_not_sizes({"5XB"}, "'XB' is not a unit");
  expect_not_sizes({"5 GB"}, "' GB' is not a unit");
  expect_not_sizes({"5GB "}, "'GB ' is not a unit");
  expect_not_sizes({"5G"}, "'G' is not a unit");
  expect_not_sizes({"1e3GB"}, "'e3GB' is not a unit");
  expect_not_sizes({"5.5.5GB"}, "'.5GB' is not a unit");
  expect_not_sizes({"5KiBb"}, "'KiBb' is not a unit");
  expect_not_sizes({"5PB"}, "'PB' is not a unit");
  expect_not_sizes({"1.5", "1.5B", "0.5b", "1.0"}, "a number of bytes is whole; a decimal needs a larger unit (1.5KB)");
}

TEST(ByteSize, ParseThrowsAConfigErrorNamingWhereTheSizeWasGiven) {
  EXPECT_EQ(accelerate::detail::parse_byte_size("2GiB", "max_memory"), 2 * kGiB);
  const std::string message =
      accelerate::testing::error_of([] { (void)accelerate::detail::parse_byte_size("5XB", "max_memory"); });
  EXPECT_NE(message.find("max_memory: '5XB' is not a size: 'XB' is not a unit. Write"), std::string::npos) << message;
}

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
