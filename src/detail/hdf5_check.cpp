#include "detail/hdf5_check.hpp"

#include <string>

#include "accelerate/error.hpp"

namespace accelerate::detail {
namespace {

herr_t append_frame(unsigned depth, const H5E_error2_t* frame, void* data) {
  auto& text = *static_cast<std::string*>(data);
  if (depth > 0) text += " <- ";
  text += frame->func_name != nullptr ? frame->func_name : "?";
  text += ": ";
  text += frame->desc != nullptr ? frame->desc : "";
  return 0;
}

}  // namespace

void throw_hdf5_error(const char* call, std::string_view object, const char* file, int line) {
  std::string stack;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, append_frame, &stack);
  H5Eclear2(H5E_DEFAULT);
  std::string message =
      std::string(call) + " failed on '" + std::string(object) + "' (" + file + ":" + std::to_string(line) + ")";
  if (!stack.empty()) message += ": " + stack;
  message +=
      ". Check that the path exists and is writable on every rank, and that the file is a "
      "complete HDF5 file ('h5ls -r <file>' should list it).";
  throw Hdf5Error(message);
}

std::string_view hdf5_runtime_version() {
  static const std::string text = [] {
    unsigned major = 0;
    unsigned minor = 0;
    unsigned release = 0;
    H5get_libversion(&major, &minor, &release);
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
  }();
  return text;
}

}  // namespace accelerate::detail
