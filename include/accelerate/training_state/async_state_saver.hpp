// AsyncStateSaver: save_training_state that blocks training only while the
// state is copied into host memory. save() checks and names the checkpoint
// as the synchronous save does, copies every tensor of the state into
// buffers of its own (reused by the next save), and returns; a thread of its
// own then writes the file and commits it (agreement of every rank, manifest,
// atomic rename, rotation) exactly as the synchronous save would. Until the
// commit, the previous checkpoint stays the newest whole one: a crash during
// the background write loses only the save in flight.
//
// One save runs at a time: save() and wait() first wait for the running one
// and throw its error, on every rank (the ranks agree on success before the
// commit). The background thread uses duplicates of the State's world and
// node communicators, so it never shares one with the training's
// collectives; MPI must therefore run at MPI_THREAD_MULTIPLE (ConfigError
// otherwise). It holds HDF5 (one thread at a time) for the write's duration.
//
// Destroy it before MPI is finalised; its destructor waits for the running
// save and reports an error it cannot throw on stderr.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include "accelerate/training_state/training_checkpoint.hpp"

namespace accelerate::checkpoint {

class AsyncStateSaver {
 public:
  AsyncStateSaver();
  ~AsyncStateSaver();
  AsyncStateSaver(const AsyncStateSaver&) = delete;
  AsyncStateSaver& operator=(const AsyncStateSaver&) = delete;

  /// save_training_state's arguments and checks. Collective over the
  /// State's world. Returns once the state is copied, with the directory the
  /// save will commit; project.iteration is advanced at once.
  std::filesystem::path save(const State& state, ProjectConfiguration& project,
                             const std::optional<std::filesystem::path>& output_dir, const TrainingStateRefs& refs,
                             CheckpointInfo info);

  /// Waits for the running save. Returns the directory it committed
  /// (nullopt when no save was running); throws its error.
  std::optional<std::filesystem::path> wait();

  /// Whether a save was started and not yet waited for.
  [[nodiscard]] bool pending() const noexcept;
  /// Whether the running save is still writing (false once it has
  /// committed or failed, before anyone waits for it).
  [[nodiscard]] bool writing() const noexcept;

  /// Bytes of host memory the snapshot buffers hold between saves.
  [[nodiscard]] std::uint64_t staging_bytes() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accelerate::checkpoint
