// CommHandle: an MPI communicator held by a header that does not include
// <mpi.h>, so that a training program's headers stay free of MPI.
//
// The options that name a communicator (StateOptions::comm, the checkpoint
// writer's and reader's comm) hold a CommHandle; it converts from an MPI_Comm
// and back where accelerate/runtime/mpi_comm.hpp is included:
//
//   #include "accelerate/runtime/mpi_comm.hpp"   // includes <mpi.h>
//   accelerate::State state({.comm = my_sub_comm});
//   MPI_Barrier(state.world_comm());
//
// Without that header the conversions (and State::world_comm() and the like)
// do not compile: the error names the incomplete accelerate::detail::MpiComm.
#pragma once

#include <cstdint>

namespace accelerate {
namespace detail {
/// The MPI_Comm type and the conversions to and from CommHandle; defined in
/// accelerate/runtime/mpi_comm.hpp. The templates below name it as a default
/// template argument, so they compile only where that header is included.
struct MpiComm;
}  // namespace detail

class CommHandle {
 public:
  /// MPI_COMM_WORLD.
  constexpr CommHandle() noexcept = default;
  /// MPI_COMM_NULL.
  [[nodiscard]] static constexpr CommHandle null() noexcept { return CommHandle(Kind::Null, 0); }
  /// Holds `comm`, an MPI_Comm (needs accelerate/runtime/mpi_comm.hpp).
  /// Implicit, as the MPI_Comm fields it replaces took their value.
  template <class Comm, class Mpi = detail::MpiComm>
  CommHandle(Comm comm) noexcept : CommHandle(Mpi::handle(comm)) {}  // NOLINT(google-explicit-constructor)
  /// The MPI_Comm held (needs accelerate/runtime/mpi_comm.hpp).
  template <class Mpi = detail::MpiComm>
  [[nodiscard]] typename Mpi::Comm get() const noexcept {
    return Mpi::comm(*this);
  }

 private:
  friend struct detail::MpiComm;
  enum class Kind : std::uint8_t { World, Null, Other };
  constexpr CommHandle(Kind kind, std::uintptr_t bits) noexcept : kind_(kind), bits_(bits) {}

  Kind kind_ = Kind::World;
  std::uintptr_t bits_ = 0;  // an Other communicator's handle, bit for bit
};

}  // namespace accelerate
