#include "accelerate/error.hpp"

#include <mpi.h>

#include <cctype>

#include "accelerate/runtime/host.hpp"

namespace accelerate::detail {

std::string where() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  std::string text = "[";
  if (initialized != 0 && finalized == 0) {
    int rank = 0;
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    text += "rank " + std::to_string(rank) + "/" + std::to_string(size) + " on ";
  }
  text += hostname();
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
  std::string variant(cmake_option.substr(cmake_option.rfind('_') + 1));
  for (char& c : variant) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  message += variant;
  message += "'); 'accelerate-hpc env' lists the features of this build.";
  throw FeatureNotBuilt(message);
}

}  // namespace accelerate::detail
