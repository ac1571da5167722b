#include "detail/unique_comm.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "detail/mpi_check.hpp"

namespace accelerate::detail {
namespace {

std::mutex abandoned_mutex;
// Never freed, so it outlives every static owner that may ask at exit.
std::vector<MPI_Comm>& abandoned_comms() {
  static auto* comms = new std::vector<MPI_Comm>();
  return *comms;
}

}  // namespace

void abandon(MPI_Comm comm) noexcept {
  if (comm == MPI_COMM_NULL) return;
  const std::lock_guard lock(abandoned_mutex);
  auto& comms = abandoned_comms();
  if (std::find(comms.begin(), comms.end(), comm) == comms.end()) comms.push_back(comm);
}

bool is_abandoned(MPI_Comm comm) noexcept {
  const std::lock_guard lock(abandoned_mutex);
  const auto& comms = abandoned_comms();
  return std::find(comms.begin(), comms.end(), comm) != comms.end();
}

bool any_abandoned() noexcept {
  const std::lock_guard lock(abandoned_mutex);
  return !abandoned_comms().empty();
}

int CommTraits::free(MPI_Comm& comm) { return MPI_Comm_free(&comm); }

int DatatypeTraits::free(MPI_Datatype& type) { return MPI_Type_free(&type); }

void report_failed_free(std::string_view call, int code) noexcept {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  std::fprintf(stderr,
               "accelerate-hpc: %.*s failed while releasing a handle: %s. The handle is leaked; "
               "if this repeats, check that MPI is not finalised before the objects that own handles.\n",
               static_cast<int>(call.size()), call.data(), text);
}

template <class Traits>
void UniqueMpiHandle<Traits>::reset(Handle handle) {
  const int code = release_handle();
  handle_ = handle;
  if (code != MPI_SUCCESS) throw_mpi_error(code, Traits::name.data(), __FILE__, __LINE__);
}

template class UniqueMpiHandle<CommTraits>;
template class UniqueMpiHandle<DatatypeTraits>;

UniqueComm duplicate_comm(MPI_Comm comm) {
  UniqueComm copy;
  ACCELERATE_MPI_CHECK(MPI_Comm_dup(comm, copy.out()));
  ACCELERATE_MPI_CHECK(MPI_Comm_set_errhandler(copy.get(), MPI_ERRORS_RETURN));
  return copy;
}

}  // namespace accelerate::detail
