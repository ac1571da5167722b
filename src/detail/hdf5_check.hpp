// ACCELERATE_HDF5_CHECK: HDF5 calls return a negative value (or an invalid
// id) on failure and leave the explanation on HDF5's error stack. The check
// turns that stack into an Hdf5Error that also names the object involved.
// Compiled only when the HDF5 feature is on.
#pragma once

#include <hdf5.h>

#include <string_view>

namespace accelerate::detail {

[[noreturn]] void throw_hdf5_error(const char* call, std::string_view object, const char* file, int line);

template <typename Result>
inline Result check_hdf5(Result result, const char* call, std::string_view object, const char* file, int line) {
  if (result < 0) [[unlikely]] {
    throw_hdf5_error(call, object, file, line);
  }
  return result;
}

/// HDF5 library version as "major.minor.release".
std::string_view hdf5_runtime_version();

}  // namespace accelerate::detail

/// `object` names the file/dataset the call was about, for the message.
#define ACCELERATE_HDF5_CHECK(expr, object) \
  ::accelerate::detail::check_hdf5((expr), #expr, (object), __FILE__, __LINE__)
