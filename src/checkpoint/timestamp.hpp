// The creation time recorded in a checkpoint's root attributes and manifest.
#pragma once

#include <string>

namespace accelerate::checkpoint::detail {

/// The current UTC time as ISO 8601, "2026-11-22T03:54:46Z".
std::string utc_now();

}  // namespace accelerate::checkpoint::detail
