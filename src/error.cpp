#include "accelerate/error.hpp"

#include "accelerate/format.hpp"

#include "detail/ascii.hpp"
#include "detail/host_name.hpp"
#include "detail/mpi_runtime.hpp"

namespace accelerate::detail {

std::string where() {
  if (const auto position = world_position()) {
    return accelerate::format("[rank {}/{} on {}]", position->rank, position->size, short_hostname());
  }
  return accelerate::format("[{}]", short_hostname());
}

void throw_feature_not_built(std::string_view feature, std::string_view needed_by, std::string_view cmake_option) {
  const std::string variant = ascii_lower(cmake_option.substr(cmake_option.rfind('_') + 1));
  throw FeatureNotBuilt(accelerate::format(
      "{} {} needs {}, but this build of Accelerate-HPC was configured without it. Rebuild with -D{}=ON (or 'spack "
      "install accelerate-hpc+{}'); 'accelerate-hpc env' lists the features of this build.",
      where(), needed_by, feature, cmake_option, variant));
}

}  // namespace accelerate::detail
