#include "detail/mpi_check.hpp"

#include <string>

#include "accelerate/error.hpp"

namespace accelerate::detail {

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  int error_class = code;
  MPI_Error_class(code, &error_class);
  std::string message = std::string(call) + " failed (" + file + ":" + std::to_string(line) + "): MPI error " +
                        std::to_string(code) + ": " + std::string(text, length) + ".";
  if (error_class == MPI_ERR_TRUNCATE || error_class == MPI_ERR_COUNT || error_class == MPI_ERR_TYPE) {
    message +=
        " The ranks passed different sizes or types to the same collective; rerun with "
        "ACCELERATE_DEBUG_MODE=1 to compare shapes and dtypes across ranks.";
  } else if (error_class == MPI_ERR_COMM) {
    message += " The communicator is invalid: was it used after accelerate::State was destroyed?";
  } else {
    message +=
        " Check that every rank reaches the same collectives in the same order and that the "
        "job's processes are all alive; the first error in the job log usually names the cause.";
  }
  throw MpiError(message, code);
}

}  // namespace accelerate::detail
