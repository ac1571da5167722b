// accelerate::State at 1, 2 and 4 ranks: layout discovery, node grouping,
// device choice, adopting an MPI the program initialised, and re-creation.
#include <gtest/gtest.h>

#include "common/test_helpers.hpp"
#include <mpi.h>

#include <set>
#include <vector>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/environment.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/state.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::testing::world_rank;
using accelerate::testing::world_size;

std::vector<int> allgather(int value) {
  std::vector<int> all(static_cast<std::size_t>(world_size()));
  MPI_Allgather(&value, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  return all;
}

TEST(State, RankAndSizeMatchMpi) {
  const accelerate::State state;
  EXPECT_EQ(state.process_index(), world_rank());
  EXPECT_EQ(state.num_processes(), world_size());
  EXPECT_EQ(state.is_main_process(), world_rank() == 0);
  EXPECT_EQ(state.is_last_process(), world_rank() == world_size() - 1);
  EXPECT_FALSE(state.owns_mpi());  // the test main initialised MPI
}

TEST(State, OneHostIsOneNode) {
  const accelerate::State state;
  // All ranks of these tests share one host.
  EXPECT_EQ(state.num_nodes(), 1);
  EXPECT_EQ(state.node_index(), 0);
  EXPECT_EQ(state.num_local_processes(), world_size());
  EXPECT_EQ(state.local_process_index(), world_rank());
  EXPECT_EQ(state.is_local_main_process(), world_rank() == 0);
}

TEST(State, EmulatedNodesSplitConsecutiveRanks) {
  accelerate::StateOptions options;
  options.emulated_ranks_per_node = 2;
  const accelerate::State state(options);
  const int rank = world_rank();
  const int size = world_size();
  EXPECT_EQ(state.num_nodes(), (size + 1) / 2);
  EXPECT_EQ(state.node_index(), rank / 2);
  EXPECT_EQ(state.local_process_index(), rank % 2);
  EXPECT_EQ(state.num_local_processes(), std::min(2, size - rank / 2 * 2));

  // The node communicator holds exactly this node's ranks.
  int node_size = 0;
  MPI_Comm_size(state.node_comm(), &node_size);
  EXPECT_EQ(node_size, state.num_local_processes());
  // The cross-node communicator holds one rank per node, ordered by node.
  int cross_rank = 0;
  int cross_size = 0;
  MPI_Comm_rank(state.cross_node_comm(), &cross_rank);
  MPI_Comm_size(state.cross_node_comm(), &cross_size);
  EXPECT_EQ(cross_rank, state.node_index());
  const auto local_ranks = allgather(state.local_process_index());
  int expected_cross = 0;
  for (int r : local_ranks) expected_cross += (r == state.local_process_index()) ? 1 : 0;
  EXPECT_EQ(cross_size, expected_cross);
}

TEST(State, EnvironmentVariableEmulatesNodes) {
  auto patch = accelerate::patch_environment({{"ACCELERATE_EMULATED_RANKS_PER_NODE", "1"}});
  const accelerate::State state;
  EXPECT_EQ(state.num_nodes(), world_size());
  EXPECT_EQ(state.node_index(), world_rank());
  EXPECT_EQ(state.local_process_index(), 0);
}

TEST(State, NodeIndicesAreDenseAndAgree) {
  accelerate::StateOptions options;
  options.emulated_ranks_per_node = 3;  // uneven split at 4 ranks: nodes of 3 and 1
  const accelerate::State state(options);
  const auto nodes = allgather(state.node_index());
  const std::set<int> distinct(nodes.begin(), nodes.end());
  EXPECT_EQ(static_cast<int>(distinct.size()), state.num_nodes());
  EXPECT_EQ(*distinct.begin(), 0);
  EXPECT_EQ(*distinct.rbegin(), state.num_nodes() - 1);
  const auto counts = allgather(state.num_nodes());
  for (int c : counts) EXPECT_EQ(c, state.num_nodes());
}

TEST(State, DeviceAndDistributedType) {
  const accelerate::State state;
  if (!accelerate::config::torch_has_cuda) EXPECT_EQ(state.device(), "cpu");
  if (world_size() == 1) {
    EXPECT_EQ(state.distributed_type(), accelerate::DistributedType::NO);
  } else if (state.use_cpu()) {
    EXPECT_EQ(state.distributed_type(), accelerate::DistributedType::MULTI_CPU);
  } else {
    EXPECT_EQ(state.distributed_type(), accelerate::DistributedType::MULTI_GPU);
  }
}

TEST(State, CpuFlagForcesTheCpu) {
  accelerate::StateOptions options;
  options.cpu = true;
  const accelerate::State state(options);
  EXPECT_EQ(state.device(), "cpu");
  auto patch = accelerate::patch_environment({{"ACCELERATE_USE_CPU", "1"}});
  const accelerate::State from_env;
  EXPECT_EQ(from_env.device(), "cpu");
}

// explicit option > ACCELERATE_* variable > default, for every setting State reads.
TEST(State, ExplicitOptionsBeatTheEnvironment) {
  auto patch = accelerate::patch_environment({{"ACCELERATE_TIMEOUT", "30"},
                                              {"ACCELERATE_LOG_LEVEL", "debug"},
                                              {"ACCELERATE_EMULATED_RANKS_PER_NODE", "1"},
                                              {"ACCELERATE_MPI_THREAD_LEVEL", "single"}});
  const accelerate::State from_environment;
  EXPECT_EQ(from_environment.timeout(), std::chrono::seconds(30));
  EXPECT_EQ(from_environment.log_level(), accelerate::LogLevel::Debug);
  EXPECT_EQ(from_environment.emulated_ranks_per_node(), 1);
  EXPECT_EQ(from_environment.num_nodes(), world_size());
  EXPECT_EQ(from_environment.thread_level_required(), accelerate::ThreadLevel::Single);

  accelerate::StateOptions options;
  options.timeout = std::chrono::seconds(1800);  // the default value, but explicit: it wins
  options.log_level = accelerate::LogLevel::Error;
  options.emulated_ranks_per_node = 0;
  options.thread_level = accelerate::ThreadLevel::Funneled;
  const accelerate::State explicit_options(options);
  EXPECT_EQ(explicit_options.timeout(), std::chrono::seconds(1800));
  EXPECT_EQ(explicit_options.log_level(), accelerate::LogLevel::Error);
  EXPECT_EQ(explicit_options.emulated_ranks_per_node(), 0);
  EXPECT_EQ(explicit_options.num_nodes(), 1);
  EXPECT_EQ(explicit_options.thread_level_required(), accelerate::ThreadLevel::Funneled);
}

TEST(State, BadSettingsInTheEnvironmentAreNamed) {
  auto patch = accelerate::patch_environment({{"ACCELERATE_LOG_LEVEL", "loud"}});
  try {
    const accelerate::State state;
    FAIL() << "expected ConfigError";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("ACCELERATE_LOG_LEVEL"), std::string::npos) << error.what();
  }
}

TEST(State, CanBeCreatedAndDestroyedRepeatedly) {
  for (int i = 0; i < 3; ++i) {
    const accelerate::State state;
    EXPECT_EQ(state.num_processes(), world_size());
    state.wait_for_everyone();
  }
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  EXPECT_EQ(initialized, 1);
  EXPECT_EQ(finalized, 0);  // an adopted MPI is never finalised by State
}

TEST(State, WorldIsADuplicateNotTheCallersCommunicator) {
  const accelerate::State state;
  int result = MPI_UNEQUAL;
  MPI_Comm_compare(state.world_comm(), MPI_COMM_WORLD, &result);
  EXPECT_EQ(result, MPI_CONGRUENT);
}

TEST(State, RunsOnASubCommunicator) {
  // Ranks split into evens and odds; each half gets its own State.
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() % 2, world_rank(), &half);
  {
    accelerate::StateOptions options;
    options.comm = half;
    const accelerate::State state(options);
    EXPECT_EQ(state.process_index(), world_rank() / 2);
    EXPECT_EQ(state.num_processes(), (world_size() + 1 - world_rank() % 2) / 2);
  }
  MPI_Comm_free(&half);
}

TEST(State, AdoptedMpiBelowTheRequiredThreadLevelIsRefused) {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided >= MPI_THREAD_MULTIPLE) GTEST_SKIP() << "this MPI was initialised with MPI_THREAD_MULTIPLE";
  accelerate::StateOptions options;
  options.thread_level = accelerate::ThreadLevel::Multiple;
  try {
    const accelerate::State state(options);
    FAIL() << "expected ConfigError";
  } catch (const accelerate::ConfigError& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("MPI_THREAD_MULTIPLE is required"), std::string::npos) << text;
    EXPECT_NE(text.find("initialised MPI itself"), std::string::npos) << text;
  }
}

TEST(State, LauncherMatchesMpi) {
  const accelerate::State state;
  const auto& launcher = state.launcher();
  if (launcher.kind == accelerate::LauncherKind::None) {
    EXPECT_EQ(world_size(), 1);
  } else {
    if (launcher.rank) EXPECT_EQ(*launcher.rank, world_rank());
    if (launcher.size) EXPECT_EQ(*launcher.size, world_size());
  }
}

TEST(State, DescribeNamesTheRank) {
  const accelerate::State state;
  const std::string line = state.describe();
  EXPECT_EQ(line.rfind("rank " + std::to_string(world_rank()) + "/" + std::to_string(world_size()), 0), 0U)
      << line;
  EXPECT_NE(line.find("device " + state.device().str()), std::string::npos) << line;
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
