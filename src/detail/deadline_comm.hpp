// DeadlineComm: the one road to MPI for the library's own collectives
// (checkpoints, data seed, process control, CLI, ProcessGroup's control
// traffic, …).
//
// Blocking MPI calls cannot time out. Every operation here is issued
// non-blocking and completed by polling until a deadline; when it passes,
// TimeoutError names the operation and, through the communicator's
// ArrivalBoard (State attaches one to each of its communicators), the ranks
// that never arrived. The communicator is then abandoned (unique_comm.hpp):
// MPI cannot cancel the collective, so the job must be aborted.
//
// A DeadlineComm is a cheap, non-owning view: build one where needed from
// the MPI_Comm and the job's timeout (State::timeout()). It finds the board
// when built, so build it after the board is attached.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace accelerate::detail {

class ArrivalBoard;

template <class T>
MPI_Datatype mpi_datatype();
template <>
inline MPI_Datatype mpi_datatype<int>() {
  return MPI_INT;
}
template <>
inline MPI_Datatype mpi_datatype<long>() {
  return MPI_LONG;
}
template <>
inline MPI_Datatype mpi_datatype<long long>() {
  return MPI_LONG_LONG;
}
template <>
inline MPI_Datatype mpi_datatype<unsigned long>() {
  return MPI_UNSIGNED_LONG;
}
template <>
inline MPI_Datatype mpi_datatype<unsigned long long>() {
  return MPI_UNSIGNED_LONG_LONG;
}

/// The reductions the library's own steps need.
enum class Reduce { Min, Max, Sum };
MPI_Op to_mpi(Reduce op);

class DeadlineComm {
 public:
  DeadlineComm(MPI_Comm comm, std::chrono::milliseconds timeout);

  [[nodiscard]] MPI_Comm get() const noexcept { return comm_; }
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int size() const { return size_; }
  /// The same view with another deadline (a per-call timeout option).
  [[nodiscard]] DeadlineComm with_timeout(std::chrono::milliseconds timeout) const {
    DeadlineComm copy = *this;
    copy.timeout_ = timeout;
    return copy;
  }

  // `what` names the operation in a TimeoutError: the public call and the step.
  void barrier(std::string_view what) const;
  void broadcast(void* buffer, int count, MPI_Datatype type, int root, std::string_view what) const;
  /// A trivially copyable value, as bytes.
  template <class T>
  void broadcast(T& value, int root, std::string_view what) const {
    static_assert(std::is_trivially_copyable_v<T>);
    broadcast(&value, static_cast<int>(sizeof(T)), MPI_BYTE, root, what);
  }
  /// Root's text, resized on the others (a length, then the bytes).
  void broadcast(std::string& text, int root, std::string_view what) const;

  /// Small values only (they travel through a staging copy). In place, element-wise.
  void all_reduce(void* values, int count, MPI_Datatype type, MPI_Op op, std::string_view what) const;
  template <class T>
  void all_reduce(T* values, int count, Reduce op, std::string_view what) const {
    all_reduce(values, count, mpi_datatype<T>(), to_mpi(op), what);
  }
  template <class T>
  [[nodiscard]] T all_reduce(T value, Reduce op, std::string_view what) const {
    all_reduce(&value, 1, op, what);
    return value;
  }

  /// Small shares only (they travel through a staging copy).
  void all_gather(const void* mine, int count, MPI_Datatype type, void* all, std::string_view what) const;
  /// `bytes` bytes from every rank into `all`, in rank order.
  void all_gather_bytes(const void* mine, int bytes, void* all, std::string_view what) const {
    all_gather(mine, bytes, MPI_BYTE, all, what);
  }
  /// Every rank's `value`, in rank order.
  template <class T>
  [[nodiscard]] std::vector<T> all_gather(const T& value, std::string_view what) const {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<T> all(static_cast<std::size_t>(size_));
    all_gather(&value, static_cast<int>(sizeof(T)), MPI_BYTE, all.data(), what);
    return all;
  }
  /// `mine` (`count` elements) into `all`, at displs[r] for rank r. MPI_IN_PLACE
  /// for `mine` when this rank's share is already in place.
  void all_gather_v(const void* mine, int count, void* all, const int* counts, const int* displs, MPI_Datatype type,
                    std::string_view what) const;

  /// Bytes: counts[r] from rank r into `all` at displs[r].
  void all_gather_bytes_v(const void* mine, int bytes, void* all, const int* counts, const int* displs,
                          std::string_view what) const {
    all_gather_v(mine, bytes, all, counts, displs, MPI_BYTE, what);
  }
  /// The same, with this rank's share already in place in `all`.
  void all_gather_bytes_in_place(void* all, const int* counts, const int* displs, std::string_view what) const {
    all_gather_v(MPI_IN_PLACE, 0, all, counts, displs, MPI_BYTE, what);
  }
  void broadcast_bytes(void* data, int bytes, int root, std::string_view what) const {
    broadcast(data, bytes, MPI_BYTE, root, what);
  }

  /// Byte strings of any length (under 2 GiB each), one per rank, in rank
  /// order: their lengths first ("<what> (sizes)"), then the bytes
  /// ("<what> (payload)"). On every rank, or on `root` only (empty elsewhere).
  [[nodiscard]] std::vector<std::vector<char>> all_gather_byte_strings(std::span<const char> mine,
                                                                       std::string_view what) const;
  [[nodiscard]] std::vector<std::vector<char>> gather_byte_strings(std::span<const char> mine, int root,
                                                                   std::string_view what) const;

  /// Root's bytes at each span (the same lengths on every rank), in one
  /// broadcast through an hindexed datatype over their addresses.
  struct Span {
    void* data;
    int bytes;
  };
  void broadcast_spans(const std::vector<Span>& spans, int root, std::string_view what) const;

  /// How many ranks of this communicator share this rank's host (the same
  /// processor name), under the deadline like every call here.
  [[nodiscard]] int ranks_on_this_host(std::string_view what) const;

  /// Completes a non-blocking collective the caller posted on this
  /// communicator (for the few calls above do not cover).
  void complete(MPI_Request& request, std::string_view what) const;

 private:
  void wait(MPI_Request& request, std::int64_t sequence, std::string_view what) const;
  // Completes `request`; on a timeout leaks `buffers`, which MPI may still use.
  template <class Buffers>
  void complete_staged(MPI_Request& request, std::string_view what, std::unique_ptr<Buffers>& buffers) const;
  // root < 0: every rank receives.
  std::vector<std::vector<char>> gather_byte_strings_to(std::span<const char> mine, int root,
                                                        std::string_view what) const;
  [[noreturn]] void report_timeout(std::int64_t sequence, std::string_view what) const;

  MPI_Comm comm_;
  std::chrono::milliseconds timeout_;
  ArrivalBoard* board_;  // nullptr: the missing ranks cannot be named
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace accelerate::detail
