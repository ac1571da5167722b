// Message formatting with format strings checked at compile time:
//
//   logger.info("step {} loss {:.4f}", step, loss);
//   accelerator.print("{} of {} processes ready", ready, accelerator.num_processes());
//
// accelerate::format and accelerate::format_string are the standard
// library's std::format where it has one, else {fmt}'s (which std::format
// was specified from: the same replacement-field syntax). Which one this
// build uses is fixed when the library is configured (config.hpp).
#pragma once

#include "accelerate/config.hpp"

#if ACCELERATE_FORMAT_USES_FMT
#include <fmt/format.h>
#else
#include <format>
#endif

namespace accelerate {

#if ACCELERATE_FORMAT_USES_FMT
template <class... Args>
using format_string = fmt::format_string<Args...>;
using fmt::format;
#else
template <class... Args>
using format_string = std::format_string<Args...>;
using std::format;
#endif

}  // namespace accelerate
