// A submodule's qualified name, as named_modules() writes it ("blocks.3.attn").
#pragma once

#include <string>

namespace accelerate::detail {

inline std::string qualified_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace accelerate::detail
