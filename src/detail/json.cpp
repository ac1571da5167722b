#include "detail/json.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "accelerate/error.hpp"

namespace accelerate::detail {
namespace {

using Library = nlohmann::json;

// Deepest nesting of arrays and objects accepted; no file this library reads
// nests more than 3 levels, and the conversions below recurse once per level.
constexpr int kMaxDepth = 64;

// `byte` is unknown (npos) for what the SAX events find: nlohmann does not
// pass the position with them.
[[noreturn]] void malformed(std::string_view source, std::size_t byte, std::string_view what) {
  const std::string at = byte == std::string_view::npos ? "" : " at byte " + std::to_string(byte);
  throw ConfigError("checkpoint: malformed JSON in '" + std::string(source) + "'" + at + ": " + std::string(what) +
                    ".");
}

// Builds a Json straight from nlohmann's SAX events: no intermediate
// document, the nesting limit enforced as the input is read, and integers
// that do not fit 64 bits refused (nlohmann would turn them into doubles).
class Builder final : public nlohmann::json_sax<Library> {
 public:
  explicit Builder(std::string_view source) : source_(source) {}

  Json result() { return std::move(root_); }

  bool null() override { return add(Json()); }
  bool boolean(bool value) override { return add(Json(value)); }
  bool number_integer(number_integer_t value) override { return add(Json(static_cast<std::int64_t>(value))); }
  bool number_unsigned(number_unsigned_t value) override {
    if (value > static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max())) {
      refuse("integer " + std::to_string(value) + " outside the 64-bit range");
    }
    return add(Json(static_cast<std::int64_t>(value)));
  }
  bool number_float(number_float_t value, const string_t& text) override {
    if (text.find_first_of(".eE") == string_t::npos) refuse("integer " + text + " outside the 64-bit range");
    return add(Json(static_cast<double>(value)));
  }
  bool string(string_t& value) override { return add(Json(std::move(value))); }
  bool binary(binary_t& /*value*/) override { refuse("binary values are not JSON"); }
  bool start_object(std::size_t /*elements*/) override {
    enter();
    push(/*is_object=*/true);
    return true;
  }
  bool key(string_t& name) override {
    stack_.back().key = std::move(name);
    return true;
  }
  bool end_object() override {
    Frame done = std::move(stack_.back());
    stack_.pop_back();
    return add(Json(std::move(done.object)));
  }
  bool start_array(std::size_t /*elements*/) override {
    enter();
    push(/*is_object=*/false);
    return true;
  }
  bool end_array() override {
    Frame done = std::move(stack_.back());
    stack_.pop_back();
    return add(Json(std::move(done.array)));
  }
  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& error) override {
    // nlohmann counts characters read, from 1; the byte offset is one less.
    malformed(source_, position > 0 ? position - 1 : 0, error.what());
  }

 private:
  struct Frame {
    bool is_object = false;
    Json::Object object;  // when is_object
    Json::Array array;    // otherwise
    std::string key;      // the member whose value comes next
  };

  void push(bool is_object) {
    stack_.emplace_back();
    stack_.back().is_object = is_object;
  }
  [[noreturn]] void refuse(const std::string& what) const { malformed(source_, std::string_view::npos, what); }
  void enter() const {
    if (static_cast<int>(stack_.size()) >= kMaxDepth) {
      refuse("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    }
  }
  bool add(Json value) {
    if (stack_.empty()) {
      root_ = std::move(value);
    } else if (Frame& top = stack_.back(); top.is_object) {
      top.object[std::move(top.key)] = std::move(value);
      top.key.clear();
    } else {
      top.array.push_back(std::move(value));
    }
    return true;
  }

  std::string_view source_;
  std::vector<Frame> stack_;
  Json root_;
};

[[noreturn]] void wrong_type(std::string_view wanted) {
  throw ConfigError("checkpoint: JSON value is not " + std::string(wanted) + ".");
}

}  // namespace

Json Json::parse(std::string_view text, std::string_view source) {
  Builder builder(source);
  Library::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json, /*strict=*/true);
  return builder.result();
}

namespace {

Library to_library(const Json& value) {
  if (value.is_null()) return nullptr;
  if (value.is_bool()) return value.boolean();
  if (value.is_integer()) return value.integer();
  if (value.is_string()) return value.string();
  if (value.is_array()) {
    Library out = Library::array();
    for (const auto& item : value.array()) out.push_back(to_library(item));
    return out;
  }
  if (value.is_object()) {
    Library out = Library::object();
    for (const auto& [name, member] : value.object()) out[name] = to_library(member);
    return out;
  }
  return value.number();
}

}  // namespace

std::string Json::dump() const {
  try {
    // Compact; non-finite numbers become null; whole doubles keep ".0".
    return to_library(*this).dump();
  } catch (const nlohmann::json::exception& error) {
    throw ConfigError(std::string("checkpoint: cannot write JSON: ") + error.what() +
                      " (names and strings must be UTF-8).");
  }
}

const Json::Object& Json::object() const {
  if (!is_object()) wrong_type("an object");
  return *std::get<std::shared_ptr<Object>>(value_);
}
const Json::Array& Json::array() const {
  if (!is_array()) wrong_type("an array");
  return *std::get<std::shared_ptr<Array>>(value_);
}
const std::string& Json::string() const {
  if (!is_string()) wrong_type("a string");
  return std::get<std::string>(value_);
}
std::int64_t Json::integer() const {
  if (!is_integer()) wrong_type("an integer");
  return std::get<std::int64_t>(value_);
}
double Json::number() const {
  if (is_integer()) return static_cast<double>(std::get<std::int64_t>(value_));
  if (!std::holds_alternative<double>(value_)) wrong_type("a number");
  return std::get<double>(value_);
}
bool Json::boolean() const {
  if (!is_bool()) wrong_type("a boolean");
  return std::get<bool>(value_);
}
const Json* Json::find(const std::string& key) const {
  if (!is_object()) return nullptr;
  const auto& members = object();
  const auto it = members.find(key);
  return it == members.end() ? nullptr : &it->second;
}

}  // namespace accelerate::detail
