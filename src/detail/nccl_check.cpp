#include "detail/nccl_check.hpp"

#include <string>

#include "accelerate/error.hpp"

namespace accelerate::detail {

void throw_nccl_error(ncclResult_t code, ncclComm_t comm, const char* call, const char* file, int line) {
  std::string message =
      std::string(call) + " failed (" + file + ":" + std::to_string(line) + "): " + ncclGetErrorString(code);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') message += std::string(" (") + last + ")";
  message += ", NCCL " + std::string(nccl_runtime_version()) + ".";
  switch (code) {
    case ncclUnhandledCudaError:
    case ncclSystemError:
      message += " A CUDA or system call failed inside NCCL; rerun with NCCL_DEBUG=WARN to see which.";
      break;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      message +=
          " The call's arguments differ between ranks or the communicator is not usable; rerun "
          "with ACCELERATE_DEBUG_MODE=1 to compare them.";
      break;
    case ncclRemoteError: message += " A peer rank failed; the first error in the job log names it."; break;
    default: message += " Rerun with NCCL_DEBUG=INFO for details.";
  }
  throw NcclError(message, static_cast<int>(code));
}

const char* nccl_runtime_version() {
  static const std::string text = [] {
    int code = 0;
    if (ncclGetVersion(&code) != ncclSuccess) return std::string("unknown");
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
    return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
  }();
  return text.c_str();
}

}  // namespace accelerate::detail
