// Atomic checkpoint directories: staging, commit, manifest, rotation.
//
// A save writes into a hidden staging directory next to the final one
// (".checkpoint_7.tmp-<nonce>"), flushes and fsyncs every file, agrees on
// success across all ranks, writes manifest.json, fsyncs the directory,
// renames it into place and fsyncs the parent. A crash at any point leaves
// either the old set of checkpoints or the old set plus the new complete one;
// readers only consider directories with a valid manifest. Rotation runs
// after the commit and never removes the newest complete checkpoint.
//
// Overwriting a directory of the same name exchanges the old and the new one
// atomically (renameat2 RENAME_EXCHANGE), so the name always holds a
// complete checkpoint. Where the file system lacks the exchange, the old one
// is moved aside first; a crash in that window leaves both as hidden
// siblings, and recover_interrupted_commit() (run by load_state) restores
// the name.
//
// The communicators of the options are CommHandles (runtime/comm_handle.hpp):
// set them from an MPI_Comm where accelerate/runtime/mpi_comm.hpp is included.
#pragma once

#include <cstdint>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/runtime/comm_handle.hpp"

namespace accelerate::checkpoint {

struct ManifestFile {
  std::string name;
  std::uint64_t bytes = 0;
};

/// Contents of manifest.json.
struct Manifest {
  std::string format;
  std::int64_t format_version = 0;
  std::int64_t step = 0;
  std::int64_t iteration = 0;
  std::int64_t world_size = 0;
  std::int64_t num_nodes = 0;
  bool save_on_each_node = false;
  std::string created;
  std::vector<ManifestFile> files;
};

/// The manifest of `directory`, or nullopt when it is absent, malformed, or
/// lists a file that is missing or has another size (an incomplete checkpoint).
std::optional<Manifest> read_complete_manifest(const std::filesystem::path& directory);

/// When `final_directory` does not exist but a commit to it was interrupted
/// (see above), puts the complete checkpoint back under its name: the new
/// one if its staging directory holds a complete manifest, else the old one
/// moved aside. Returns what was done, or nullopt when nothing was needed or
/// possible. Local (not collective): one rank per file group calls it.
std::optional<std::string> recover_interrupted_commit(const std::filesystem::path& final_directory);

/// The index i of a directory named checkpoint_<i>, or nullopt for any other name.
std::optional<std::int64_t> checkpoint_index(const std::filesystem::path& directory);

/// Complete checkpoints checkpoint_<i> directly under `root`, oldest first.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& root);

/// The newest complete checkpoint under `root` (highest i), or nullopt.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& root);

/// Removes the oldest complete checkpoints under `root` until at most
/// `total_limit` remain; `keep` (the one just committed) and the newest are
/// never removed, and directories that do not match the scheme or lack a
/// valid manifest are never touched. Returns the removed directories. Local
/// (not collective).
std::vector<std::filesystem::path> rotate_checkpoints(const std::filesystem::path& root, int total_limit,
                                                      const std::filesystem::path& keep);

/// File name inside a checkpoint directory for the file written by `node`
/// ("state.h5", or "state.node<k>.h5" with save_on_each_node).
std::string state_file_name(bool save_on_each_node, int node);

struct StagingOptions {
  /// All ranks of the job (success is agreed over it). Default MPI_COMM_WORLD.
  CommHandle world;
  /// The ranks writing one file together: the world, or the node's ranks
  /// with save_on_each_node. Its rank 0 manages the directory. Default MPI_COMM_WORLD.
  CommHandle file_comm;
  bool save_on_each_node = false;
  int node_index = 0;
  int num_nodes = 1;
  /// Replace an existing directory of the same name (otherwise: ConfigError).
  bool overwrite = false;
  /// Deadline of each collective step; a rank that does not arrive in time
  /// becomes a TimeoutError naming it (save_state passes State::timeout()).
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
};

/// How a commit put the checkpoint under its final name.
enum class CommitMethod {
  None,             ///< not committed, or not by this rank (one rank per commit moves the directory)
  Rename,           ///< the name was free: one rename
  Exchange,         ///< overwrite, atomic: renameat2(RENAME_EXCHANGE), then the old one removed
  AsideThenRename,  ///< overwrite where the file system cannot exchange: old aside, new in place
};

/// One save in progress. Collective construction and commit.
///
///   StagedCheckpoint staged(final_dir, {.world = w, .file_comm = w});
///   { CheckpointWriter writer({.comm = w, .file = staged.file_path()}, info); ...; writer.close(); }
///   staged.commit(true, manifest_fields, project.total_limit);
class StagedCheckpoint {
 public:
  StagedCheckpoint(std::filesystem::path final_directory, const StagingOptions& options);
  /// Removes the staging directory when the save was not committed.
  ~StagedCheckpoint();
  StagedCheckpoint(const StagedCheckpoint&) = delete;
  StagedCheckpoint& operator=(const StagedCheckpoint&) = delete;

  [[nodiscard]] const std::filesystem::path& staging_directory() const noexcept { return staging_; }
  [[nodiscard]] const std::filesystem::path& final_directory() const noexcept { return final_; }
  /// Where this rank's file group writes its HDF5 file.
  [[nodiscard]] std::filesystem::path file_path() const;

  /// Makes the checkpoint durable and visible. `local_ok` is false on a rank
  /// whose part of the save failed: then nobody commits and every rank
  /// throws. `manifest` supplies step/iteration/world size (files and
  /// format are filled in here). With `total_limit`, older checkpoints next
  /// to the final directory are rotated after the commit. Collective.
  void commit(bool local_ok, Manifest manifest, std::optional<int> total_limit = std::nullopt);

  /// How commit() moved the directory, on the rank that moved it; none elsewhere.
  [[nodiscard]] CommitMethod commit_method() const noexcept { return method_; }

 private:
  std::filesystem::path final_;
  std::filesystem::path staging_;
  StagingOptions options_;
  bool leader_ = false;
  bool committed_ = false;
  CommitMethod method_ = CommitMethod::None;
};

}  // namespace accelerate::checkpoint
