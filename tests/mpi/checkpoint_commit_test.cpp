// Atomic checkpoint directories at 1, 2 and 4 ranks: staging and commit,
// automatic naming with total_limit rotation, a failing rank aborting the
// commit everywhere, refusal to overwrite, and save_on_each_node with
// emulated nodes (each node writes and reads its own file).
#include <gtest/gtest.h>
#include <fcntl.h>  // AT_FDCWD
#include <mpi.h>

#include <ATen/ATen.h>

#include <cstdio>  // renameat2
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "accelerate/checkpoint/checkpoint_directory.hpp"
#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/checkpoint/checkpoint_writer.hpp"
#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/training_state/project_configuration.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace ckpt = accelerate::checkpoint;
namespace fs = std::filesystem;
using accelerate::testing::error_of;
using accelerate::testing::world_rank;
using accelerate::testing::world_size;

namespace {

// A directory shared by all ranks, fresh for each test.
fs::path shared_directory(const std::string& test) {
  return accelerate::testing::shared_temp_directory("ckpt_commit_" + test);
}

void cleanup(const fs::path& dir) { accelerate::testing::remove_shared_directory(dir); }

at::Tensor weights(int iteration) { return at::arange(3000000, at::kFloat).add(iteration); }

// Returns how the commit moved the directory (the moving rank's answer, on every rank).
ckpt::CommitMethod save(const fs::path& final_dir, int iteration, std::optional<int> total_limit, bool ok = true,
                        bool overwrite = false) {
  ckpt::StagedCheckpoint staged(final_dir,
                                {.world = MPI_COMM_WORLD, .file_comm = MPI_COMM_WORLD, .overwrite = overwrite});
  {
    ckpt::CheckpointWriter writer({.comm = MPI_COMM_WORLD, .file = staged.file_path()}, {.iteration = iteration});
    writer.write_replicated("pytorch_model/w", weights(iteration));
    writer.close();
  }
  staged.commit(ok, ckpt::Manifest{.step = 10 * iteration, .iteration = iteration, .world_size = world_size()},
                total_limit);
  int method = static_cast<int>(staged.commit_method());
  MPI_Allreduce(MPI_IN_PLACE, &method, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return static_cast<ckpt::CommitMethod>(method);
}

// Whether this file system exchanges two names in one step (renameat2 RENAME_EXCHANGE).
bool file_system_can_exchange(const fs::path& root) {
  int can = 0;
  if (world_rank() == 0) {
    fs::create_directories(root / "probe_a");
    fs::create_directories(root / "probe_b");
    can = ::renameat2(AT_FDCWD, (root / "probe_a").c_str(), AT_FDCWD, (root / "probe_b").c_str(), RENAME_EXCHANGE) == 0;
    fs::remove_all(root / "probe_a");
    fs::remove_all(root / "probe_b");
  }
  MPI_Bcast(&can, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return can != 0;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(CheckpointCommit, AutomaticNamingWithTotalLimitKeepsTheNewest) {
  const fs::path project = shared_directory("rotation");
  ckpt::ProjectConfiguration config{.automatic_checkpoint_naming = true, .total_limit = 2};
  config.set_directories(project.string());
  config.validate();
  for (int i = 0; i < 5; ++i) {
    save(ckpt::automatic_checkpoint_path(config, config.iteration), static_cast<int>(config.iteration),
         config.total_limit);
    ++config.iteration;
    // After every save the newest complete one is the one just written.
    EXPECT_EQ(ckpt::latest_checkpoint(ckpt::checkpoints_directory(config)),
              ckpt::automatic_checkpoint_path(config, config.iteration - 1));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(names_in(ckpt::checkpoints_directory(config)), (std::vector<std::string>{"checkpoint_3", "checkpoint_4"}));
  const auto manifest = ckpt::read_complete_manifest(ckpt::checkpoints_directory(config) / "checkpoint_4");
  ASSERT_TRUE(manifest.has_value());
  EXPECT_EQ(manifest->iteration, 4);
  EXPECT_EQ(manifest->step, 40);
  EXPECT_EQ(manifest->world_size, world_size());
  ASSERT_EQ(manifest->files.size(), 1U);
  EXPECT_EQ(manifest->files[0].name, "state.h5");

  ckpt::CheckpointReader reader(
      {.comm = MPI_COMM_WORLD, .file = *ckpt::latest_checkpoint(ckpt::checkpoints_directory(config)) / "state.h5"});
  EXPECT_EQ(reader.header().iteration, 4);
  EXPECT_TRUE(at::equal(reader.read_replicated("pytorch_model/w"), weights(4)));
  cleanup(project);
}

TEST(CheckpointCommit, ARankThatFailsStopsTheCommitEverywhere) {
  const fs::path root = shared_directory("failure");
  save(root / "checkpoint_0", 0, 1);
  const bool ok = world_rank() != world_size() - 1;
  const std::string message = error_of<accelerate::Error>([&] { save(root / "checkpoint_1", 1, 1, ok); });
  EXPECT_NE(message.find("failed on rank " + std::to_string(world_size() - 1)), std::string::npos) << message;
  MPI_Barrier(MPI_COMM_WORLD);
  // Nothing of the failed save remains, and rotation (limit 1) did not run.
  EXPECT_EQ(names_in(root), std::vector<std::string>{"checkpoint_0"});
  EXPECT_EQ(ckpt::latest_checkpoint(root), root / "checkpoint_0");
  cleanup(root);
}

TEST(CheckpointCommit, ExistingDirectoryIsKeptUnlessOverwriting) {
  const fs::path root = shared_directory("exists");
  save(root / "checkpoint_0", 0, std::nullopt);
  const std::string message = error_of<accelerate::Error>([&] { save(root / "checkpoint_0", 1, std::nullopt); });
  EXPECT_NE(message.find("already exists"), std::string::npos) << message;
  {
    ckpt::StagedCheckpoint staged(root / "checkpoint_0",
                                  {.world = MPI_COMM_WORLD, .file_comm = MPI_COMM_WORLD, .overwrite = true});
    ckpt::CheckpointWriter writer({.comm = MPI_COMM_WORLD, .file = staged.file_path()}, {.iteration = 7});
    writer.write_replicated("pytorch_model/w", weights(7));
    writer.close();
    staged.commit(true, ckpt::Manifest{.iteration = 7, .world_size = world_size()});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(names_in(root), std::vector<std::string>{"checkpoint_0"});
  EXPECT_EQ(ckpt::read_complete_manifest(root / "checkpoint_0")->iteration, 7);
  cleanup(root);
}

// A commit that overwrites on a file system without an atomic exchange moves
// the old checkpoint aside before the new one takes its name; a crash between
// the two leaves hidden siblings only. recover_interrupted_commit (run by
// load_state) puts a complete checkpoint back under the name: the new one if
// its commit had begun (complete manifest), else the old one; never a staging
// directory whose save had not been agreed on.
TEST(CheckpointCommit, InterruptedOverwriteIsRecoveredUnderItsName) {
  const fs::path root = shared_directory("recover");
  save(root / "ck", 1, std::nullopt);
  save(root / "next", 2, std::nullopt);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    // The crash state: old aside, new staged and complete, no "ck".
    fs::rename(root / "ck", root / ".ck.old-aaaa");
    fs::rename(root / "next", root / ".ck.tmp-bbbb");
    const auto done = ckpt::recover_interrupted_commit(root / "ck");
    ASSERT_TRUE(done.has_value());
    EXPECT_NE(done->find("completed the interrupted commit"), std::string::npos) << *done;
    EXPECT_EQ(ckpt::read_complete_manifest(root / "ck")->iteration, 2);
    EXPECT_FALSE(ckpt::recover_interrupted_commit(root / "ck").has_value());  // nothing left to do

    // The crash came before the new one was complete: the old one returns.
    fs::remove_all(root / "ck");
    fs::create_directory(root / ".ck.tmp-cccc");
    std::ofstream(root / ".ck.tmp-cccc" / "state.h5") << "partial";
    const auto restored = ckpt::recover_interrupted_commit(root / "ck");
    ASSERT_TRUE(restored.has_value());
    EXPECT_NE(restored->find("restored the previous"), std::string::npos) << *restored;
    EXPECT_EQ(ckpt::read_complete_manifest(root / "ck")->iteration, 1);

    // Nothing complete to recover: the name stays absent.
    fs::remove_all(root / "ck");
    EXPECT_FALSE(ckpt::recover_interrupted_commit(root / "ck").has_value());
    EXPECT_FALSE(fs::exists(root / "ck"));
  }
  cleanup(root);
}

// An overwrite takes the atomic exchange where the file system has it, and
// the two renames (old aside, new in place) where it does not (forced here
// by the test hook); either way only the new checkpoint remains, no sibling.
TEST(CheckpointCommit, OverwriteExchangesWhereItCanAndMovesAsideWhereItCannot) {
  const fs::path root = shared_directory("overwrite");
  const bool can_exchange = file_system_can_exchange(root);
  for (const bool forced : {false, true}) {
    SCOPED_TRACE(forced ? "exchange disabled by the test hook" : "exchange allowed");
    if (forced) {
      ::setenv("ACCELERATE_TEST_CHECKPOINT_NO_EXCHANGE", "1", 1);
    } else {
      ::unsetenv("ACCELERATE_TEST_CHECKPOINT_NO_EXCHANGE");
    }
    const fs::path name = root / (forced ? "ck_forced" : "ck");
    EXPECT_EQ(save(name, 1, std::nullopt), ckpt::CommitMethod::Rename);
    const ckpt::CommitMethod expected =
        can_exchange && !forced ? ckpt::CommitMethod::Exchange : ckpt::CommitMethod::AsideThenRename;
    EXPECT_EQ(save(name, 2, std::nullopt, true, /*overwrite=*/true), expected);
    EXPECT_EQ(ckpt::read_complete_manifest(name)->iteration, 2);
    ckpt::CheckpointReader reader({.file = name / ckpt::STATE_FILE_NAME});
    EXPECT_TRUE(at::equal(reader.read_replicated("pytorch_model/w"), weights(2)));
  }
  ::unsetenv("ACCELERATE_TEST_CHECKPOINT_NO_EXCHANGE");
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(names_in(root), (std::vector<std::string>{"ck", "ck_forced"}));
  cleanup(root);
}

// Every rank is its own (emulated) node: each node's ranks write the node's
// file, each node reads its own; on this shared file system all files land
// in one directory, committed once.
TEST(CheckpointCommit, SaveOnEachNodeWritesAndReadsOneFilePerNode) {
  const fs::path root = shared_directory("each_node");
  accelerate::State state({.emulated_ranks_per_node = world_size() >= 4 ? 2 : 1});
  const int node = state.node_index();
  {
    ckpt::StagedCheckpoint staged(root / "checkpoint_0", {.world = state.world_comm(),
                                                          .file_comm = state.node_comm(),
                                                          .save_on_each_node = true,
                                                          .node_index = node,
                                                          .num_nodes = state.num_nodes()});
    ckpt::CheckpointWriter writer({.comm = state.node_comm(), .file = staged.file_path(), .num_nodes = state.num_nodes(),
                                   .node_index = node},
                                  {});
    writer.write_replicated("pytorch_model/node_marker", at::full({4}, node, at::kLong));
    writer.write_per_rank("random_states/local", at::full({2}, state.process_index(), at::kLong));
    writer.close();
    staged.commit(true, ckpt::Manifest{.world_size = world_size()});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const auto manifest = ckpt::read_complete_manifest(root / "checkpoint_0");
  ASSERT_TRUE(manifest.has_value());
  EXPECT_EQ(static_cast<int>(manifest->files.size()), state.num_nodes());
  EXPECT_TRUE(manifest->save_on_each_node);

  ckpt::CheckpointReader reader(
      {.comm = state.node_comm(), .file = root / "checkpoint_0" / ckpt::state_file_name(true, node)});
  EXPECT_EQ(reader.header().node_index, node);
  EXPECT_EQ(reader.header().num_nodes, state.num_nodes());
  EXPECT_TRUE(at::equal(reader.read_replicated("pytorch_model/node_marker"), at::full({4}, node, at::kLong)));
  EXPECT_TRUE(at::equal(reader.read_per_rank("random_states/local"), at::full({2}, state.process_index(), at::kLong)));
  cleanup(root);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
