#include "checkpoint/json.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "accelerate/error.hpp"

namespace accelerate::checkpoint::detail {
namespace {

// Deepest nesting of arrays and objects accepted; no file this library reads
// nests more than 3 levels, and the parser recurses once per level.
constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  Json document() {
    Json value = parse_value(0);
    skip_space();
    if (at_ != text_.size()) fail("trailing characters");
    return value;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw ConfigError(accelerate::detail::where() + " checkpoint: malformed JSON in '" + std::string(source_) +
                      "' at byte " + std::to_string(at_) + ": " + std::string(what) + ".");
  }
  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\r' || text_[at_] == '\t'))
      ++at_;
  }
  bool consume(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }
  void expect(char c) {
    skip_space();
    if (at_ >= text_.size() || text_[at_] != c) fail(std::string("expected '") + c + "'");
    ++at_;
  }

  Json parse_value(int depth) {
    if (depth >= kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    skip_space();
    if (at_ >= text_.size()) fail("unexpected end");
    const char c = text_[at_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Json(parse_string());
    if (consume("true")) return Json(true);
    if (consume("false")) return Json(false);
    if (consume("null")) return Json();
    return parse_number();
  }

  Json parse_object(int depth) {
    ++at_;
    Json::Object members;
    skip_space();
    if (at_ < text_.size() && text_[at_] == '}') {
      ++at_;
      return Json(std::move(members));
    }
    for (;;) {
      skip_space();
      if (at_ >= text_.size() || text_[at_] != '"') fail("expected a member name");
      std::string key = parse_string();
      expect(':');
      members[std::move(key)] = parse_value(depth + 1);
      skip_space();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      expect('}');
      return Json(std::move(members));
    }
  }

  Json parse_array(int depth) {
    ++at_;
    Json::Array items;
    skip_space();
    if (at_ < text_.size() && text_[at_] == ']') {
      ++at_;
      return Json(std::move(items));
    }
    for (;;) {
      items.push_back(parse_value(depth + 1));
      skip_space();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      expect(']');
      return Json(std::move(items));
    }
  }

  void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  unsigned parse_hex4() {
    if (at_ + 4 > text_.size()) fail("short \\u escape");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[at_++];
      code <<= 4;
      if (h >= '0' && h <= '9') code |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') code |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') code |= static_cast<unsigned>(h - 'A' + 10);
      else fail("bad \\u escape");
    }
    return code;
  }

  std::string parse_string() {
    ++at_;  // opening quote
    std::string out;
    while (at_ < text_.size()) {
      const char c = text_[at_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= text_.size()) break;
      const char e = text_[at_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned code = parse_hex4();
          if (code >= 0xDC00 && code < 0xE000) fail("unpaired low surrogate in a \\u escape");
          if (code >= 0xD800 && code < 0xDC00) {
            if (!consume("\\u")) fail("unpaired high surrogate in a \\u escape");
            const unsigned low = parse_hex4();
            if (low < 0xDC00 || low >= 0xE000) fail("a high surrogate not followed by a low one in a \\u escape");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, code);
          break;
        }
        default: fail("bad escape");
      }
    }
    fail("unterminated string");
  }

  Json parse_number() {
    const std::size_t start = at_;
    bool integral = true;
    if (at_ < text_.size() && text_[at_] == '-') ++at_;
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (c >= '0' && c <= '9') {
        ++at_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        integral = false;
        ++at_;
      } else {
        break;
      }
    }
    if (start == at_) fail("unexpected character");
    const std::string number(text_.substr(start, at_ - start));
    char* end = nullptr;
    errno = 0;
    if (integral) {
      const long long value = std::strtoll(number.c_str(), &end, 10);
      if (*end == '\0' && errno == ERANGE) fail("integer " + number + " outside the 64-bit range");
      if (*end == '\0') return Json(static_cast<std::int64_t>(value));
    }
    const double value = std::strtod(number.c_str(), &end);
    if (*end != '\0' || number.back() == '.') fail("bad number");
    return Json(value);
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t at_ = 0;
};

void dump_string(const std::string& text, std::string& out) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
          out += escape;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

[[noreturn]] void wrong_type(std::string_view wanted) {
  throw ConfigError(accelerate::detail::where() + " checkpoint: JSON value is not " + std::string(wanted) + ".");
}

}  // namespace

Json Json::parse(std::string_view text, std::string_view source) { return Parser(text, source).document(); }

std::string Json::dump() const {
  std::string out;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          out += "null";
        } else if constexpr (std::is_same_v<T, bool>) {
          out += v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          out += std::to_string(v);
        } else if constexpr (std::is_same_v<T, double>) {
          char text[32];
          std::snprintf(text, sizeof text, "%.17g", v);
          out += std::isfinite(v) ? text : "null";
          // A whole number keeps a fraction, so that it reads back as a double.
          if (std::isfinite(v) && std::string_view(text).find_first_not_of("-0123456789") == std::string_view::npos) {
            out += ".0";
          }
        } else if constexpr (std::is_same_v<T, std::string>) {
          dump_string(v, out);
        } else if constexpr (std::is_same_v<T, std::shared_ptr<Array>>) {
          out += '[';
          for (std::size_t i = 0; i < v->size(); ++i) {
            if (i) out += ',';
            out += (*v)[i].dump();
          }
          out += ']';
        } else {
          out += '{';
          bool first = true;
          for (const auto& [key, value] : *v) {
            if (!first) out += ',';
            first = false;
            dump_string(key, out);
            out += ':';
            out += value.dump();
          }
          out += '}';
        }
      },
      value_);
  return out;
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

}  // namespace accelerate::checkpoint::detail
