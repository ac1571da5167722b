// GradScaler at 1, 2 and 4 ranks: with gradients that were not all-reduced,
// an overflow on one rank must make every rank skip when the scaler has a
// ProcessGroup, and only that rank without one.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "accelerate/amp/grad_scaler.hpp"
#include "accelerate/comm/process_group.hpp"
#include "accelerate/runtime/state.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

struct Replica {
  torch::nn::Linear model{torch::nn::LinearOptions(3, 2)};
  torch::optim::SGD optimizer{model->parameters(), 0.1};

  explicit Replica(int rank) {
    torch::NoGradGuard no_grad;
    model->weight.copy_(torch::linspace(-1, 1, 6).reshape({2, 3}));
    model->bias.zero_();
    // Each rank's own data: local gradients differ between ranks.
    input_ = torch::full({4, 3}, 0.25 * (rank + 1));
  }
  // Backward of the scaled loss; `poison` puts an inf into one gradient.
  void backward(accelerate::GradScaler& scaler, bool poison) {
    optimizer.zero_grad();
    scaler.scale(model(input_).pow(2).sum()).backward();
    if (poison) {
      torch::NoGradGuard no_grad;
      model->weight.grad()[0][1].fill_(std::numeric_limits<float>::infinity());
    }
  }
  [[nodiscard]] torch::Tensor weight() const { return model->weight.detach().clone(); }

 private:
  torch::Tensor input_;
};

// How many ranks report `flag`.
int count_true(accelerate::ProcessGroup& group, bool flag) {
  auto t = torch::full({1}, flag ? 1 : 0, torch::kInt);
  group.all_reduce(t);
  return t.item<int>();
}

TEST(GradScalerAcrossRanks, FoundInfIsAgreedThroughTheGroup) {
  const accelerate::State state;
  auto group = accelerate::ProcessGroup::world(state);
  const int last = group->size() - 1;
  Replica replica(group->rank());
  accelerate::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 100}, group.get());

  // A clean step: everyone steps.
  replica.backward(scaler, false);
  EXPECT_TRUE(scaler.step(replica.optimizer));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1024.0);

  // Only the last rank overflows; every rank must skip and back off.
  replica.backward(scaler, group->rank() == last);
  const auto before = replica.weight();
  const bool stepped = scaler.step(replica.optimizer);
  scaler.update();
  EXPECT_FALSE(stepped);
  EXPECT_TRUE(torch::equal(before, replica.weight()));
  EXPECT_EQ(scaler.get_scale(), 512.0);
  EXPECT_EQ(count_true(*group, stepped), 0);

  // And the run continues in step on every rank.
  replica.backward(scaler, false);
  scaler.unscale_(replica.optimizer);
  EXPECT_TRUE(scaler.step(replica.optimizer));
  scaler.update();
  auto scales = torch::full({1}, scaler.get_scale(), torch::kDouble);
  const auto all_scales = group->all_gather(scales);
  EXPECT_TRUE(torch::all(all_scales == 512.0).item<bool>()) << all_scales;
}

TEST(GradScalerAcrossRanks, WithoutAGroupOnlyTheOverflowingRankSkips) {
  const accelerate::State state;
  auto group = accelerate::ProcessGroup::world(state);
  const int last = group->size() - 1;
  Replica replica(group->rank());
  accelerate::GradScaler scaler({.init_scale = 1024.0});
  replica.backward(scaler, group->rank() == last);
  const bool stepped = scaler.step(replica.optimizer);
  scaler.update();
  EXPECT_EQ(stepped, group->rank() != last);
  EXPECT_EQ(scaler.get_scale(), group->rank() == last ? 512.0 : 1024.0);
  EXPECT_EQ(count_true(*group, stepped), group->size() - 1);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
