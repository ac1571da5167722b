#pragma once
// ASCII case folding and trimming for names read from the user (settings,
// environment variables, choices such as "fp16" or "csv"). These names are
// ASCII by definition, so the C locale's rules are the right ones, whatever
// locale the program runs in.

#include <cctype>
#include <string>
#include <string_view>

namespace accelerate::detail {

inline std::string ascii_lower(std::string_view text) {
  std::string result(text);
  for (char& c : result) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return result;
}

inline std::string ascii_upper(std::string_view text) {
  std::string result(text);
  for (char& c : result) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return result;
}

/// `text` without the white space (space, tab, newline …) around it.
inline std::string_view trim_blanks(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())) != 0) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0) text.remove_suffix(1);
  return text;
}

}  // namespace accelerate::detail
