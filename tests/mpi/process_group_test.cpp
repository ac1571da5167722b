// Process groups at 1, 2 and 4 ranks: node/cross-node/new_group, routing by
// device, object collectives, debug-mode mismatch detection and timeouts
// that name the ranks that never arrived.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/environment.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/state.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::ProcessGroup;

accelerate::StateOptions two_per_node() {
  accelerate::StateOptions options;
  options.emulated_ranks_per_node = 2;
  return options;
}

TEST(Groups, NodeAndCrossNodeFollowTheLayout) {
  const accelerate::State state(two_per_node());
  auto node = ProcessGroup::node(state);
  auto cross = ProcessGroup::cross_node(state);
  EXPECT_EQ(node->size(), state.num_local_processes());
  EXPECT_EQ(node->rank(), state.local_process_index());
  EXPECT_EQ(cross->rank(), state.node_index());
  // Sum of world ranks within my node / across nodes with my local rank.
  auto t = torch::full({1}, state.process_index(), torch::kInt64);
  node->all_reduce(t);
  int64_t expected = 0;
  for (int r = 0; r < state.num_processes(); ++r) expected += (r / 2 == state.node_index()) ? r : 0;
  EXPECT_EQ(t.item<int64_t>(), expected);
  auto c = torch::full({1}, state.process_index(), torch::kInt64);
  cross->all_reduce(c);
  int64_t cross_expected = 0;
  for (int r = 0; r < state.num_processes(); ++r) cross_expected += (r % 2 == state.local_process_index()) ? r : 0;
  EXPECT_EQ(c.item<int64_t>(), cross_expected);
}

TEST(Groups, NewGroupFollowsTheListOrder) {
  const accelerate::State state;
  // Odd ranks in reverse order; even ranks are not members.
  std::vector<int> ranks;
  for (int r = state.num_processes() - 1; r >= 0; --r) {
    if (r % 2 == 1) ranks.push_back(r);
  }
  if (ranks.empty()) ranks.push_back(0);
  auto group = ProcessGroup::new_group(state, ranks);
  const auto where = std::find(ranks.begin(), ranks.end(), state.process_index());
  if (where == ranks.end()) {
    EXPECT_EQ(group, nullptr);
    return;
  }
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->rank(), where - ranks.begin());
  EXPECT_EQ(group->size(), static_cast<int>(ranks.size()));
  auto t = torch::full({1}, state.process_index());
  group->broadcast(t, {.root = 0});
  EXPECT_EQ(t.item<float>(), static_cast<float>(ranks.front()));
}

TEST(Groups, SubGroupOfAGroupCountsRanksOfTheParent) {
  const accelerate::State state;
  // Parent: the world in reverse order. Sub-group: parent ranks 0 and 2 (if any), i.e. the
  // last and the third-to-last world ranks, in that order.
  std::vector<int> reversed;
  for (int r = state.num_processes() - 1; r >= 0; --r) reversed.push_back(r);
  auto parent = ProcessGroup::new_group(state, reversed);
  ASSERT_NE(parent, nullptr);
  std::vector<int> ranks{0};
  if (parent->size() > 2) ranks.push_back(2);
  auto group = ProcessGroup::new_group(state, *parent, ranks);
  const auto where = std::find(ranks.begin(), ranks.end(), parent->rank());
  if (where == ranks.end()) {
    EXPECT_EQ(group, nullptr);
  } else {
    ASSERT_NE(group, nullptr);
    EXPECT_EQ(group->rank(), where - ranks.begin());
    EXPECT_EQ(group->size(), static_cast<int>(ranks.size()));
    EXPECT_NE(group->name().find("of group["), std::string::npos) << group->name();
    auto t = torch::full({1}, state.process_index(), torch::kInt64);
    group->all_reduce(t);
    int64_t expected = 0;
    for (int r : ranks) expected += state.num_processes() - 1 - r;  // the world rank of parent rank r
    EXPECT_EQ(t.item<int64_t>(), expected);
  }
  // The parent is still in step on every rank.
  parent->barrier();
}

TEST(Groups, BadSubGroupListsFailOnEveryRankOfTheParent) {
  const accelerate::State state;
  auto parent = ProcessGroup::world(state);
  try {
    ProcessGroup::new_group(state, *parent, {parent->size()});
    FAIL() << "expected ConfigError";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("ranks of group 'world'"), std::string::npos) << error.what();
  }
  EXPECT_THROW(ProcessGroup::new_group(state, *parent, {}), accelerate::ConfigError);
}

TEST(Groups, BadRankListsFailOnEveryRank) {
  const accelerate::State state;
  EXPECT_THROW(ProcessGroup::new_group(state, {0, 0}), accelerate::ConfigError);
  EXPECT_THROW(ProcessGroup::new_group(state, {state.num_processes()}), accelerate::ConfigError);
  if (state.num_processes() > 1) {
    // Each rank names only itself: the lists differ, everyone must hear about it.
    try {
      ProcessGroup::new_group(state, {state.process_index()});
      FAIL() << "expected ConfigError";
    } catch (const accelerate::ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find("new_group"), std::string::npos);
    }
  }
}

TEST(Routing, CpuTensorsUseMpiCudaTensorsNeedNccl) {
  const accelerate::State state;
  auto group = ProcessGroup::world(state);
  EXPECT_EQ(group->backend_for(c10::Device(c10::kCPU)).name(), "mpi");
  if (!accelerate::config::has_nccl) {
    EXPECT_THROW(group->backend_for(c10::Device(c10::kCUDA, 0)), accelerate::FeatureNotBuilt);
  } else if (state.use_cpu()) {
    try {
      group->backend_for(c10::Device(c10::kCUDA, 0));
      FAIL() << "expected ConfigError";
    } catch (const accelerate::ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find("created for the CPU"), std::string::npos) << error.what();
    }
  }
}

TEST(Objects, BroadcastNestedObjects) {
  const accelerate::State state;
  auto group = ProcessGroup::world(state);
  const int root = state.num_processes() - 1;
  c10::IValue object;
  if (state.process_index() == root) {
    c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
    dict.insert("epoch", int64_t{7});
    dict.insert("name", std::string("run-42"));
    dict.insert("weights", torch::arange(4, torch::kFloat32));
    dict.insert("flags", c10::List<bool>({true, false}));
    object = dict;
  }
  group->broadcast_object(object, root);
  ASSERT_TRUE(object.isGenericDict());
  const auto dict = object.toGenericDict();
  EXPECT_EQ(dict.at("epoch").toInt(), 7);
  EXPECT_EQ(dict.at("name").toStringRef(), "run-42");
  EXPECT_TRUE(torch::equal(dict.at("weights").toTensor(), torch::arange(4, torch::kFloat32)));
  EXPECT_FALSE(dict.at("flags").toBoolList().get(1));
}

TEST(Objects, BroadcastObjectListReplacesEveryElement) {
  const accelerate::State state;
  auto group = ProcessGroup::world(state);
  std::vector<c10::IValue> objects(3);
  if (state.is_main_process()) objects = {int64_t{1}, std::string("two"), 3.5};
  group->broadcast_object_list(objects, 0);
  EXPECT_EQ(objects[0].toInt(), 1);
  EXPECT_EQ(objects[1].toStringRef(), "two");
  EXPECT_EQ(objects[2].toDouble(), 3.5);
}

TEST(Objects, GatherAndAllGatherInRankOrder) {
  const accelerate::State state;
  auto group = ProcessGroup::world(state);
  // Objects of different sizes per rank.
  const c10::IValue mine(std::string(static_cast<std::size_t>(state.process_index() * 100 + 1), 'x'));
  const auto everywhere = group->all_gather_object(mine);
  ASSERT_EQ(static_cast<int>(everywhere.size()), state.num_processes());
  for (int r = 0; r < state.num_processes(); ++r) {
    EXPECT_EQ(everywhere[static_cast<std::size_t>(r)].toStringRef().size(), static_cast<std::size_t>(r * 100 + 1));
  }
  const auto at_root = group->gather_object(c10::IValue(int64_t{state.process_index() * 3}), 0);
  if (state.is_main_process()) {
    ASSERT_EQ(static_cast<int>(at_root.size()), state.num_processes());
    for (int r = 0; r < state.num_processes(); ++r) EXPECT_EQ(at_root[static_cast<std::size_t>(r)].toInt(), 3 * r);
  } else {
    EXPECT_TRUE(at_root.empty());
  }
}

// The world group with ACCELERATE_DEBUG_MODE=1 set while it is made.
std::unique_ptr<ProcessGroup> debug_world(const accelerate::State& state) {
  auto patch = accelerate::patch_environment({{"ACCELERATE_DEBUG_MODE", "1"}});
  auto group = ProcessGroup::world(state);
  EXPECT_TRUE(group->debug_mode());
  return group;
}

TEST(DebugMode, ShapeMismatchIsReportedOnEveryRankWithEachShape) {
  const accelerate::State state;
  if (state.num_processes() < 2) GTEST_SKIP() << "needs ranks that can disagree";
  auto group = debug_world(state);
  ASSERT_TRUE(group->debug_mode());
  auto t = torch::ones({2, state.process_index() + 1});
  try {
    group->all_reduce(t);
    FAIL() << "expected CollectiveMismatch";
  } catch (const accelerate::CollectiveMismatch& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("Cannot apply all_reduce"), std::string::npos) << text;
    EXPECT_NE(text.find("Process 0: all_reduce Float [2, 1]"), std::string::npos) << text;
    EXPECT_NE(text.find("Process 1: all_reduce Float [2, 2]"), std::string::npos) << text;
  }
  // Matching shapes pass the check and reduce.
  auto same = torch::ones({3});
  group->all_reduce(same);
  EXPECT_EQ(same[0].item<float>(), static_cast<float>(state.num_processes()));
  // all_gather_varying only needs the trailing dimensions to agree.
  auto varying = group->all_gather_varying(torch::ones({state.process_index() + 1, 2}));
  EXPECT_EQ(varying.size(1), 2);
}

TEST(DebugMode, AllReduceBufferIsCheckedLikeTheOtherCollectives) {
  const accelerate::State state;
  if (state.num_processes() < 2) GTEST_SKIP() << "needs ranks that can disagree";
  auto group = debug_world(state);
  ASSERT_TRUE(group->debug_mode());
  // Rank 0 asks for a buffer while the others all-reduce: named on every
  // rank instead of an all_reduce matched against the buffer's set-up.
  auto t = torch::ones({1000});
  try {
    if (state.process_index() == 0) {
      (void)group->all_reduce_buffer(1000, torch::TensorOptions().dtype(torch::kFloat32));
    } else {
      group->all_reduce(t);
    }
    FAIL() << "expected CollectiveMismatch";
  } catch (const accelerate::CollectiveMismatch& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("Process 0: all_reduce_buffer Float [1000]"), std::string::npos) << text;
    EXPECT_NE(text.find("Process 1: all_reduce Float [1000]"), std::string::npos) << text;
  }
  // Matching calls pass the check.
  const auto buffer = group->all_reduce_buffer(1000, torch::TensorOptions().dtype(torch::kFloat32));
  EXPECT_EQ(buffer.numel(), 1000);
}

TEST(DebugMode, OffByDefault) {
  const accelerate::State state;
  auto group = ProcessGroup::world(state);
  EXPECT_FALSE(group->debug_mode());
}

TEST(Timeout, MissingRankIsNamedInsteadOfHanging) {
  const accelerate::State state;
  if (state.num_processes() < 2) GTEST_SKIP() << "needs a rank to go missing";
  // MPI's all-reduce, whose arrival barrier the late rank completes below
  // (shared_memory_all_reduce_test covers the shared-memory deadline).
  auto group = ProcessGroup::world(state, {.timeout = std::chrono::milliseconds(1500),
                                           .abort_on_timeout = false,
                                           .shared_memory_all_reduce = false});
  const int missing = state.num_processes() - 1;
  auto t = torch::ones({8});
  if (state.process_index() != missing) {
    const auto start = std::chrono::steady_clock::now();
    try {
      group->all_reduce(t);
      ADD_FAILURE() << "all_reduce completed without rank " << missing;
    } catch (const accelerate::TimeoutError& error) {
      const std::string text = error.what();
      EXPECT_NE(text.find("all_reduce(sum) Float[8] on group 'world'"), std::string::npos) << text;
      EXPECT_NE(text.find("Ranks that never arrived: " + std::to_string(missing) +
                          " (no answer: not inside any collective of this group)"),
                std::string::npos)
          << text;
      EXPECT_NE(text.find("did not complete after 1."), std::string::npos) << text;
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1400));
    MPI_Barrier(MPI_COMM_WORLD);  // let the late rank go
    MPI_Barrier(MPI_COMM_WORLD);  // MPI progress in here completes the abandoned collective
  } else {
    MPI_Barrier(MPI_COMM_WORLD);  // arrive only after the others gave up
    // A small blocking all_reduce first waits in an arrival barrier (see
    // docs/collectives.md); that is where the others gave up, so a barrier
    // completes their abandoned operation.
    group->barrier();
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// The control steps (objects, row counts) name their step and the rank that
// never arrived. The late rank then joins the one collective the others
// posted, so that nothing is left pending at exit.
TEST(Timeout, ControlStepsNameTheirStepAndTheMissingRank) {
  using std::chrono::milliseconds;
  const accelerate::State state;
  if (state.num_processes() < 2) GTEST_SKIP() << "needs a rank to go missing";
  const int missing = state.num_processes() - 1;
  const bool late = state.process_index() == missing;
  const std::string never_arrived = "Ranks that never arrived: " + std::to_string(missing) + " (no answer";
  const auto ranks = static_cast<std::size_t>(state.num_processes());
  struct Step {
    std::string expected;  // in the TimeoutError
    std::function<void(ProcessGroup&)> call;
    // The late rank's match of the first collective: non-blocking, as
    // blocking collectives never match non-blocking ones.
    std::function<void(MPI_Comm)> join;
  };
  const std::vector<Step> steps{
      // From the late rank: a root that sent eagerly would not wait for it.
      {"broadcast_object (size)",
       [missing](ProcessGroup& g) {
         c10::IValue object(int64_t{7});
         g.broadcast_object(object, missing);
       },
       [missing](MPI_Comm comm) {
         int64_t length = 0;
         MPI_Request request = MPI_REQUEST_NULL;
         MPI_Ibcast(&length, static_cast<int>(sizeof length), MPI_BYTE, missing, comm, &request);
         MPI_Wait(&request, MPI_STATUS_IGNORE);
       }},
      {"all_gather_object (sizes)", [](ProcessGroup& g) { (void)g.all_gather_object(c10::IValue(int64_t{1})); },
       [ranks](MPI_Comm comm) {
         int length = 0;
         std::vector<int> lengths(ranks);
         MPI_Request request = MPI_REQUEST_NULL;
         MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm, &request);
         MPI_Wait(&request, MPI_STATUS_IGNORE);
       }},
      // The group's deadline is a minute: the call's own option must win.
      {"all_gather_varying (row counts) did not complete within 1000 ms",
       [](ProcessGroup& g) { (void)g.all_gather_varying(torch::ones({2}), {.timeout = milliseconds(1000)}); },
       [ranks](MPI_Comm comm) {
         int64_t rows = 0;
         std::vector<int64_t> all(ranks);
         MPI_Request request = MPI_REQUEST_NULL;
         MPI_Iallgather(&rows, static_cast<int>(sizeof rows), MPI_BYTE, all.data(), static_cast<int>(sizeof rows),
                        MPI_BYTE, comm, &request);
         MPI_Wait(&request, MPI_STATUS_IGNORE);
       }},
  };
  for (const Step& step : steps) {
    const bool per_call = step.expected.find("1000 ms") != std::string::npos;
    auto group = ProcessGroup::world(state, {.timeout = per_call ? milliseconds(60000) : milliseconds(1000),
                                             .abort_on_timeout = false});
    if (!late) {
      const auto start = std::chrono::steady_clock::now();
      try {
        step.call(*group);
        ADD_FAILURE() << step.expected << ": completed without rank " << missing;
      } catch (const accelerate::TimeoutError& error) {
        const std::string text = error.what();
        EXPECT_NE(text.find(step.expected), std::string::npos) << text;
        EXPECT_NE(text.find(never_arrived), std::string::npos) << text;
      }
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << step.expected;
      MPI_Barrier(MPI_COMM_WORLD);  // let the late rank go
    } else {
      MPI_Barrier(MPI_COMM_WORLD);  // arrive only after the others gave up
      step.join(group->control_comm());
    }
    MPI_Barrier(MPI_COMM_WORLD);  // progress here completes the abandoned collective
  }
}

// gather_object: only the root waits for everyone.
TEST(Timeout, GatherObjectNamesTheMissingRankOnTheRoot) {
  const accelerate::State state;
  if (state.num_processes() < 2) GTEST_SKIP() << "needs a rank to go missing";
  const int missing = state.num_processes() - 1;
  auto group = ProcessGroup::world(state, {.timeout = std::chrono::milliseconds(1000), .abort_on_timeout = false});
  if (state.process_index() == 0) {
    try {
      (void)group->gather_object(c10::IValue(int64_t{1}), 0);
      ADD_FAILURE() << "gather_object completed without rank " << missing;
    } catch (const accelerate::TimeoutError& error) {
      const std::string text = error.what();
      EXPECT_NE(text.find("gather_object (sizes)"), std::string::npos) << text;
      // Senders that finished are listed too: they no longer answer.
      EXPECT_NE(text.find("Ranks that never arrived: "), std::string::npos) << text;
      EXPECT_NE(text.find(std::to_string(missing) + " (no answer"), std::string::npos) << text;
    }
  } else if (state.process_index() != missing) {
    // Other senders may finish or give up waiting for the root's payload step.
    try {
      (void)group->gather_object(c10::IValue(int64_t{1}), 0);
    } catch (const accelerate::TimeoutError&) {
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (state.process_index() == missing) {
    int length = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Igather(&length, 1, MPI_INT, nullptr, 1, MPI_INT, 0, group->control_comm(), &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
