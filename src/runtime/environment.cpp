#include "accelerate/runtime/environment.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "accelerate/error.hpp"
#include "detail/ascii.hpp"

extern char** environ;  // POSIX: the process environment block

namespace accelerate {
namespace {

void set_or_unset(const std::string& name, const std::optional<std::string>& value) {
  if (value) {
    ::setenv(name.c_str(), value->c_str(), 1);
  } else {
    ::unsetenv(name.c_str());
  }
}

[[noreturn]] void bad_value(const std::string& name, const std::string& value, const std::string& expected) {
  throw ConfigError("environment variable " + name + "='" + value + "' is invalid: expected " + expected +
                    ". Fix or unset it.");
}

}  // namespace

EnvironmentPatch::EnvironmentPatch(const std::map<std::string, std::string>& variables) {
  saved_.reserve(variables.size());
  for (const auto& [key, value] : variables) {
    const std::string name = detail::ascii_upper(key);
    saved_.emplace_back(name, get_env(name));
    ::setenv(name.c_str(), value.c_str(), 1);
  }
}

EnvironmentPatch::~EnvironmentPatch() {
  // Restore in reverse so a key given twice ends with its original value.
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) set_or_unset(it->first, it->second);
}

EnvironmentClear::EnvironmentClear() {
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string line(*entry);
    const auto equals = line.find('=');
    if (equals == std::string::npos) continue;
    saved_.emplace_back(line.substr(0, equals), line.substr(equals + 1));
  }
  ::clearenv();
}

EnvironmentClear::~EnvironmentClear() {
  ::clearenv();
  for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
}

std::optional<std::string> get_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

bool env_flag(const std::string& name, bool fallback) { return env_bool(name).value_or(fallback); }

std::optional<bool> env_bool(const std::string& name) {
  const auto value = get_env(name);
  if (!value || value->empty()) return std::nullopt;
  const std::string v = detail::ascii_lower(*value);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  bad_value(name, *value, "one of 1/true/yes/on or 0/false/no/off");
}

std::optional<long long> env_int(const std::string& name, long long min, long long max) {
  const auto value = get_env(name);
  if (!value || value->empty()) return std::nullopt;
  long long number = 0;
  const char* first = value->data();
  const char* last = first + value->size();
  const auto [end, error] = std::from_chars(first, last, number);
  if (error != std::errc{} || end != last || number < min || number > max) {
    bad_value(name, *value, "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return number;
}

std::optional<std::string> env_choice(const std::string& name, const std::vector<std::string>& choices) {
  const auto value = get_env(name);
  if (!value || value->empty()) return std::nullopt;
  const std::string v = detail::ascii_lower(*value);
  if (std::find(choices.begin(), choices.end(), v) != choices.end()) return v;
  std::string expected = "one of";
  for (const auto& choice : choices) expected += " '" + choice + "'";
  bad_value(name, *value, expected);
}

}  // namespace accelerate
