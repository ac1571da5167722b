// A small JSON value for checkpoint manifests and safetensors headers
// (objects, arrays, strings, integers, floating-point numbers, booleans,
// null), read and written by nlohmann-json. Integers keep 64-bit precision;
// the reader refuses what a file of untrusted bytes must not do to us
// (nesting beyond 64 levels, integers beyond 64 bits, invalid UTF-8).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace accelerate::detail {

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::map<std::string, Json>;

  Json() = default;  // null
  Json(bool value) : value_(value) {}
  Json(std::int64_t value) : value_(value) {}
  Json(int value) : value_(static_cast<std::int64_t>(value)) {}
  Json(double value) : value_(value) {}
  Json(std::string value) : value_(std::move(value)) {}
  Json(const char* value) : value_(std::string(value)) {}
  Json(Array value) : value_(std::make_shared<Array>(std::move(value))) {}
  Json(Object value) : value_(std::make_shared<Object>(std::move(value))) {}

  /// Throws ConfigError naming `source` and the offset on malformed input.
  static Json parse(std::string_view text, std::string_view source);
  [[nodiscard]] std::string dump() const;

  [[nodiscard]] bool is_null() const { return std::holds_alternative<std::monostate>(value_); }
  [[nodiscard]] bool is_object() const { return std::holds_alternative<std::shared_ptr<Object>>(value_); }
  [[nodiscard]] bool is_array() const { return std::holds_alternative<std::shared_ptr<Array>>(value_); }
  [[nodiscard]] bool is_string() const { return std::holds_alternative<std::string>(value_); }
  [[nodiscard]] bool is_integer() const { return std::holds_alternative<std::int64_t>(value_); }
  [[nodiscard]] bool is_bool() const { return std::holds_alternative<bool>(value_); }

  // Accessors throw ConfigError when the value has another type.
  [[nodiscard]] const Object& object() const;
  [[nodiscard]] const Array& array() const;
  [[nodiscard]] const std::string& string() const;
  [[nodiscard]] std::int64_t integer() const;
  /// An integer or a floating-point number, as a double.
  [[nodiscard]] double number() const;
  [[nodiscard]] bool boolean() const;
  /// Member `key` of an object, or nullptr.
  [[nodiscard]] const Json* find(const std::string& key) const;

 private:
  std::variant<std::monostate, bool, std::int64_t, double, std::string, std::shared_ptr<Array>, std::shared_ptr<Object>>
      value_;
};

}  // namespace accelerate::detail
