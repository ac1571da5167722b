// Versions of the library and of everything it was built with, as reported
// by `accelerate-hpc env` (what a user pastes into a bug report).
#pragma once

#include <string>
#include <vector>

namespace accelerate {

struct ComponentInfo {
  std::string name;     ///< "LibTorch", "MPI", "HDF5", …
  bool enabled = true;  ///< false for an optional feature this build lacks
  std::string version;  ///< run-time version where it can be asked, else build-time
  std::string detail;   ///< e.g. "parallel", the MPI library string, why it is off
};

/// One entry per component, library first. Safe to call before MPI_Init.
std::vector<ComponentInfo> build_components();

}  // namespace accelerate
