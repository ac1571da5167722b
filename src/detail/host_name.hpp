// The host's short name (up to the first dot), for error messages and the
// State's layout. Below runtime, so that error.cpp can name the host
// without depending on runtime (runtime's hostname() is this function).
#pragma once

#include <string>

namespace accelerate::detail {

/// gethostname() up to the first dot; "unknown-host" when it fails.
[[nodiscard]] std::string short_hostname();

}  // namespace accelerate::detail
