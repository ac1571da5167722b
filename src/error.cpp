#include "accelerate/error.hpp"

#include "detail/ascii.hpp"
#include "detail/host_name.hpp"
#include "detail/mpi_runtime.hpp"

namespace accelerate::detail {

std::string where() {
  std::string text = "[";
  if (const auto position = world_position()) {
    text += "rank " + std::to_string(position->rank) + "/" + std::to_string(position->size) + " on ";
  }
  text += short_hostname();
  text += "]";
  return text;
}

void throw_feature_not_built(std::string_view feature, std::string_view needed_by,
                             std::string_view cmake_option) {
  std::string message = where();
  message += " ";
  message += needed_by;
  message += " needs ";
  message += feature;
  message += ", but this build of Accelerate-HPC was configured without it. Rebuild with -D";
  message += cmake_option;
  message += "=ON (or 'spack install accelerate-hpc+";
  message += ascii_lower(cmake_option.substr(cmake_option.rfind('_') + 1));
  message += "'); 'accelerate-hpc env' lists the features of this build.";
  throw FeatureNotBuilt(message);
}

}  // namespace accelerate::detail
