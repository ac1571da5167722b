// The MPI side of CommHandle (runtime/comm_handle.hpp): include this header,
// which includes <mpi.h>, to pass an MPI_Comm where the library takes a
// CommHandle and to call the accessors that return an MPI_Comm
// (State::world_comm(), node_comm(), cross_node_comm(),
// ProcessGroup::control_comm()). The umbrella header does not include it.
#pragma once

#include <mpi.h>

#include <bit>
#include <cstdint>
#include <type_traits>

#include "accelerate/runtime/comm_handle.hpp"

namespace accelerate {
namespace detail {

struct MpiComm {
  using Comm = MPI_Comm;
  static_assert(std::is_pointer_v<MPI_Comm> || std::is_integral_v<MPI_Comm>,
                "an MPI_Comm is a pointer (Open MPI, the MPI ABI) or an int (MPICH)");

  static CommHandle handle(MPI_Comm comm) noexcept {
    if (comm == MPI_COMM_WORLD) return {};
    if (comm == MPI_COMM_NULL) return CommHandle::null();
    return {CommHandle::Kind::Other, to_bits(comm)};
  }

  static MPI_Comm comm(const CommHandle& handle) noexcept {
    switch (handle.kind_) {
      case CommHandle::Kind::World: return MPI_COMM_WORLD;
      case CommHandle::Kind::Null: return MPI_COMM_NULL;
      case CommHandle::Kind::Other: break;
    }
    return from_bits<MPI_Comm>(handle.bits_);
  }

 private:
  // Templates, so that only the branch of this MPI's handle type is compiled.
  template <class C>
  static std::uintptr_t to_bits(C comm) noexcept {
    if constexpr (std::is_pointer_v<C>) {
      return std::bit_cast<std::uintptr_t>(comm);
    } else {
      return static_cast<std::uintptr_t>(comm);  // an int: sign-extended, truncated back below
    }
  }
  template <class C>
  static C from_bits(std::uintptr_t bits) noexcept {
    if constexpr (std::is_pointer_v<C>) {
      return std::bit_cast<C>(bits);
    } else {
      return static_cast<C>(bits);
    }
  }
};

}  // namespace detail
}  // namespace accelerate
