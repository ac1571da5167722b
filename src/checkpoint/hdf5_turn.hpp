// One thread at a time in HDF5. The parallel HDF5 that distributions ship is
// built without its thread-safe option (configure refuses it with MPI), so no
// two threads of a process may be inside the library at once. Since saves can
// run on a thread of their own (AsyncStateSaver), every object that holds an
// HDF5 file open (CheckpointWriter, CheckpointReader) holds an Hdf5Turn for
// its whole life: another thread opening a file waits until it is released.
#pragma once

namespace accelerate::checkpoint::detail {

class Hdf5Turn {
 public:
  /// Waits until no other thread holds a turn. A thread may hold several
  /// (a reader and a writer open together).
  Hdf5Turn();
  ~Hdf5Turn();
  Hdf5Turn(const Hdf5Turn&) = delete;
  Hdf5Turn& operator=(const Hdf5Turn&) = delete;

  /// Whether the calling thread holds a turn (a file of the format layer is
  /// open on it): a thread that would then wait for another thread's HDF5
  /// work would wait for itself.
  [[nodiscard]] static bool held_by_this_thread() noexcept;
};

}  // namespace accelerate::checkpoint::detail
