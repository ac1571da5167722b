// RAII owners for MPI handles, and the one rule for communicators that a
// timed-out collective left behind.
//
// The rule: a communicator with a pending (abandoned) collective is never
// freed. MPI cannot cancel a collective and may still progress it when a late
// rank arrives; freeing the communicator under it crashed Open MPI's libnbc
// in testing. Whoever gives up on a collective calls abandon(comm); every
// owner (UniqueComm) asks is_abandoned before freeing. The process is about
// to be torn down anyway (the TimeoutError says to abort), so the leak is
// bounded.
#pragma once

#include <mpi.h>

#include <string_view>

#include "detail/mpi_runtime.hpp"

namespace accelerate::detail {

/// Records that `comm` has a collective that will never complete here.
void abandon(MPI_Comm comm) noexcept;
[[nodiscard]] bool is_abandoned(MPI_Comm comm) noexcept;
/// Whether this process gave up on any collective: a peer is known to be
/// missing, so no collective exit (MPI_Finalize) may wait for it.
[[nodiscard]] bool any_abandoned() noexcept;

/// How each kind of handle is freed. The traits are the template parameter,
/// not the handle type: MPICH's MPI_Comm and MPI_Datatype are both `int`.
struct CommTraits {
  using Handle = MPI_Comm;
  static MPI_Comm null() { return MPI_COMM_NULL; }
  static int free(MPI_Comm& comm);
  static bool keep(MPI_Comm comm) { return is_abandoned(comm); }
  static constexpr std::string_view name = "MPI_Comm_free";
};

struct DatatypeTraits {
  using Handle = MPI_Datatype;
  static MPI_Datatype null() { return MPI_DATATYPE_NULL; }
  static int free(MPI_Datatype& type);
  static bool keep(MPI_Datatype) { return false; }
  static constexpr std::string_view name = "MPI_Type_free";
};

/// Reports a failed free from a destructor (stderr, with the rank).
void report_failed_free(std::string_view call, int code) noexcept;

/// Frees a handle at scope exit. A failed free is reported on stderr (a
/// destructor must not throw); reset() throws MpiError instead.
template <class Traits>
class UniqueMpiHandle {
  using Handle = typename Traits::Handle;

 public:
  UniqueMpiHandle() noexcept : handle_(Traits::null()) {}
  explicit UniqueMpiHandle(Handle handle) noexcept : handle_(handle) {}
  ~UniqueMpiHandle() {
    const int code = release_handle();
    if (code != MPI_SUCCESS) report_failed_free(Traits::name, code);
  }
  UniqueMpiHandle(UniqueMpiHandle&& other) noexcept : handle_(other.handle_) { other.handle_ = Traits::null(); }
  UniqueMpiHandle& operator=(UniqueMpiHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = other.handle_;
      other.handle_ = Traits::null();
    }
    return *this;
  }
  UniqueMpiHandle(const UniqueMpiHandle&) = delete;
  UniqueMpiHandle& operator=(const UniqueMpiHandle&) = delete;

  [[nodiscard]] Handle get() const noexcept { return handle_; }
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != Traits::null(); }

  /// Frees the current handle (throwing MpiError on failure), then owns `handle`.
  void reset(Handle handle = Traits::null());

  /// Gives the handle up without freeing it.
  [[nodiscard]] Handle release() noexcept {
    const Handle handle = handle_;
    handle_ = Traits::null();
    return handle;
  }

  /// Frees the current handle and returns a slot for a call that creates one
  /// (MPI_Comm_dup(comm, owner.out())).
  Handle* out() {
    reset();
    return &handle_;
  }

 private:
  // Frees unless null, already finalised, or abandoned; returns MPI's code.
  int release_handle() noexcept {
    int code = MPI_SUCCESS;
    if (handle_ != Traits::null() && !Traits::keep(handle_) && mpi_is_running()) code = Traits::free(handle_);
    handle_ = Traits::null();
    return code;
  }

  Handle handle_;
};

using UniqueComm = UniqueMpiHandle<CommTraits>;
using UniqueDatatype = UniqueMpiHandle<DatatypeTraits>;

/// A duplicate of `comm` whose errors come back as codes (MPI_ERRORS_RETURN),
/// as every communicator the library makes. Collective over `comm`.
[[nodiscard]] UniqueComm duplicate_comm(MPI_Comm comm);

}  // namespace accelerate::detail
