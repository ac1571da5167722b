// set_seed and synchronize_rng_states at 1, 2 and 4 ranks.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/random/rng_state.hpp"
#include "accelerate/random/seed.hpp"
#include "accelerate/runtime/state.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::testing::error_of;

// Rows: every rank's `values`, in rank order.
torch::Tensor gathered(accelerate::ProcessGroup& group, const torch::Tensor& values) {
  return group.all_gather(values.reshape({1, -1}));
}

bool all_rows_equal(const torch::Tensor& rows) {
  for (int64_t r = 1; r < rows.size(0); ++r) {
    if (!torch::equal(rows[r], rows[0])) return false;
  }
  return true;
}

bool all_rows_distinct(const torch::Tensor& rows) {
  for (int64_t a = 0; a < rows.size(0); ++a) {
    for (int64_t b = a + 1; b < rows.size(0); ++b) {
      if (torch::equal(rows[a], rows[b])) return false;
    }
  }
  return true;
}

TEST(SetSeedAcrossRanks, SameSeedSameNumbersEverywhere) {
  const accelerate::State state;
  auto group = accelerate::ProcessGroup::world(state);
  accelerate::set_seed(2024);
  EXPECT_TRUE(all_rows_equal(gathered(*group, torch::randn({8}))));
}

TEST(SetSeedAcrossRanks, DeviceSpecificDiffersPerRank) {
  const accelerate::State state;
  auto group = accelerate::ProcessGroup::world(state);
  accelerate::set_seed(2024, /*device_specific=*/true, false, &state);
  const auto mine = torch::randn({8});
  EXPECT_TRUE(all_rows_distinct(gathered(*group, mine)));
  accelerate::set_seed(2024 + static_cast<std::uint64_t>(state.process_index()));
  EXPECT_TRUE(torch::equal(torch::randn({8}), mine));
}

TEST(SynchronizeRngStates, NextNumbersAreRankZeros) {
  const accelerate::State state;
  auto group = accelerate::ProcessGroup::world(state);
  const int rank = group->rank();
  accelerate::set_seed(100, true, false, &state);
  at::Generator generator = at::detail::createCPUGenerator(500 + static_cast<std::uint64_t>(rank));
  // What rank 0 would draw next anyway (its states are the ones sent).
  const auto saved = accelerate::capture_rng_states(&generator);
  const auto rank0_next = group->all_gather(torch::randn({1, 8}))[0];
  auto rank0_gen = torch::randn({1, 8}, generator);
  group->broadcast(rank0_gen);
  accelerate::restore_rng_states(saved, &generator);
  if (group->size() > 1) {
    ASSERT_TRUE(all_rows_distinct(gathered(*group, torch::randn({8}))))  // the test means something
        << "ranks were seeded alike before synchronising";
    accelerate::restore_rng_states(saved, &generator);
  }

  accelerate::synchronize_rng_states({"torch", "cuda", "generator"}, *group, &generator);
  const auto next = torch::randn({8});
  const auto next_gen = torch::randn({8}, generator);
  EXPECT_TRUE(torch::equal(next, rank0_next));
  EXPECT_TRUE(torch::equal(next_gen, rank0_gen[0]));
  EXPECT_TRUE(all_rows_equal(gathered(*group, torch::randn({8}))));
  EXPECT_TRUE(all_rows_equal(gathered(*group, torch::randn({8}, generator))));
}

TEST(SynchronizeRngStates, SingleTypeLeavesTheOthersAlone) {
  const accelerate::State state;
  auto group = accelerate::ProcessGroup::world(state);
  accelerate::set_seed(7, true, false, &state);
  at::Generator generator = at::detail::createCPUGenerator(900 + static_cast<std::uint64_t>(group->rank()));
  accelerate::synchronize_rng_state(accelerate::RngType::Generator, *group, &generator);
  EXPECT_TRUE(all_rows_equal(gathered(*group, torch::randn({8}, generator))));
  const auto torch_rows = gathered(*group, torch::randn({8}));
  if (group->size() > 1) EXPECT_TRUE(all_rows_distinct(torch_rows));
}

TEST(SynchronizeRngStates, BadInputFailsOnEveryRank) {
  const accelerate::State state;
  auto group = accelerate::ProcessGroup::world(state);
  const int rank = group->rank();
  const bool last = rank == group->size() - 1;

  // An unknown name everywhere.
  auto message = error_of([&] { accelerate::synchronize_rng_states({"torch", "numpy"}, *group); });
  EXPECT_NE(message.find("'numpy'"), std::string::npos) << message;
  EXPECT_NE(message.find("\"torch\", \"cuda\", \"generator\""), std::string::npos) << message;

  // An unknown name on the last rank only: every rank fails, none hangs.
  message = error_of([&] {
    accelerate::synchronize_rng_states({last ? "torhc" : "torch"}, *group);
  });
  EXPECT_NE(message.find(last ? "'torhc'" : "another rank listed an unknown rng type"), std::string::npos)
      << message;

  // Different lists.
  at::Generator generator = at::detail::createCPUGenerator(1);
  if (group->size() > 1) {
    message = error_of([&] {
      accelerate::synchronize_rng_states(
          last ? std::vector<std::string>{"torch", "generator"} : std::vector<std::string>{"torch"}, *group,
          &generator);
    });
    EXPECT_NE(message.find("listed different rng types"), std::string::npos) << message;
  }

  // "generator" without a generator on one rank.
  message = error_of([&] {
    accelerate::synchronize_rng_states({"generator"}, *group, last ? nullptr : &generator);
  });
  EXPECT_NE(message.find("without passing a generator"), std::string::npos) << message;

  // The group still works afterwards.
  accelerate::set_seed(3, true, false, &state);
  accelerate::synchronize_rng_states({"torch"}, *group);
  EXPECT_TRUE(all_rows_equal(gathered(*group, torch::randn({8}))));
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
