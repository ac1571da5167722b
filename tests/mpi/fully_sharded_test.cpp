// FullyShardedModel (ZeRO stage 3, FULL_SHARD) at 1, 2 and 4 ranks, against
// a reference trained in this process on every rank's data (the gradients of
// the ranks' losses, averaged, stepped by the whole optimizer): training
// with Adam or SGD, in one or two param groups, ends where the reference
// ends, within rounding; each rank holds 1/N of the parameters (none whole
// outside forward and backward, each unit freed after its forward and after
// its backward), 1/N of the gradients and of the optimizer state; a
// parameter unused on some ranks,
// a frozen unit, micro-steps that only accumulate, clipping and full state
// dicts agree with the reference; a unit skipped on some ranks keeps the
// collectives in step; what cannot be sharded is refused.
#include "accelerate/training/fully_sharded_model.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/modeling/empty_weights.hpp"
#include "accelerate/runtime/state.hpp"
#include "common/test_helpers.hpp"
#include "common/world_group.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;

constexpr int kSteps = 4;
constexpr std::int64_t kRowsPerRank = 6;

// Two linear layers, the second of which joins in on the ranks where `use`
// says so: its parameters get no gradient on the others.
struct MaybeUnusedImpl : torch::nn::Module {
  explicit MaybeUnusedImpl(bool use_second)
      : first(register_module("first", torch::nn::Linear(9, 5))),
        second(register_module("second", torch::nn::Linear(9, 5))),
        use(use_second) {}
  torch::Tensor forward(const torch::Tensor& x) { return use ? first(x) + second(x) : first(x); }
  torch::nn::Linear first;
  torch::nn::Linear second;
  bool use;
};
TORCH_MODULE(MaybeUnused);

// Records a value (the whole parameters held) as the forward passes it, and
// again as the gradient passes it back.
struct ProbeImpl : torch::nn::Module {
  explicit ProbeImpl(std::function<void(bool backward)> seen) : seen_(std::move(seen)) {}
  torch::Tensor forward(const torch::Tensor& x) {
    seen_(false);
    torch::Tensor y = x * 1.0;
    if (y.requires_grad()) y.register_hook([this](const torch::Tensor&) { seen_(true); });
    return y;
  }
  std::function<void(bool)> seen_;
};
TORCH_MODULE(Probe);

// A unit that passes its input through where `skip` says so: on those
// ranks its parameters get no gradient and its output has no node of its own.
struct MaybeSkipImpl : torch::nn::Module {
  explicit MaybeSkipImpl(bool skip_it) : layer(register_module("layer", torch::nn::Linear(9, 9))), skip(skip_it) {}
  torch::Tensor forward(const torch::Tensor& x) { return skip ? x : layer(x); }
  torch::nn::Linear layer;
  bool skip;
};
TORCH_MODULE(MaybeSkip);

// Units of odd sizes, so that shards cut through parameters and need padding.
torch::nn::Sequential make_net(bool use_second = true, const std::function<void(bool)>& probe = {}) {
  torch::manual_seed(11);
  torch::nn::Sequential net(torch::nn::Linear(7, 9), torch::nn::Tanh());
  if (probe) net->push_back(Probe(probe));
  net->push_back(MaybeUnused(use_second));
  net->push_back(torch::nn::ReLU());
  net->push_back(torch::nn::Linear(5, 3));
  return net;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& first,
                                                        const std::vector<torch::Tensor>& rest, bool adam) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (adam) {
    groups.emplace_back(first, std::make_unique<torch::optim::AdamOptions>(0.02));
    if (!rest.empty()) groups.emplace_back(rest, std::make_unique<torch::optim::AdamOptions>(0.005));
    return std::make_unique<torch::optim::Adam>(groups, torch::optim::AdamOptions(0.01).weight_decay(0.01));
  }
  groups.emplace_back(first, std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(0.2).momentum(0.9)));
  if (!rest.empty()) {
    groups.emplace_back(rest, std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(0.05).momentum(0.5)));
  }
  return std::make_unique<torch::optim::SGD>(groups, torch::optim::SGDOptions(0.1).weight_decay(0.01));
}

// With two groups, the parameters of unit 0 (the first Linear) in the first
// and the rest in the second; else all in the first.
void split(const torch::nn::Sequential& net, bool two_groups, std::vector<torch::Tensor>& first,
           std::vector<torch::Tensor>& rest) {
  for (const auto& named : net->named_parameters()) {
    (!two_groups || named.key().rfind("0.", 0) == 0 ? first : rest).push_back(named.value());
  }
}

class FullyShardedTest : public ::testing::Test {
 protected:
  acc::State state;
  std::unique_ptr<acc::ProcessGroup> group = acc::testing::world_group(state);
  torch::Tensor x, y;

  void SetUp() override {
    torch::manual_seed(5);
    x = torch::randn({kRowsPerRank * group->size(), 7});
    y = torch::randn({kRowsPerRank * group->size(), 3});
  }
  [[nodiscard]] torch::Tensor rows(const torch::Tensor& t, int rank) const {
    return t.narrow(0, kRowsPerRank * rank, kRowsPerRank);
  }
  // Rank r's unit 2 uses its second layer where r is even, when `unused`.
  static bool uses_second(int rank, bool unused) { return !unused || rank % 2 == 0; }

  // The reference: one process, every rank's loss on one net (each with that
  // rank's use of unit 2), the gradients averaged, the whole optimizer.
  std::map<std::string, torch::Tensor> reference(bool adam, bool two_groups, bool unused, double clip = 0,
                                                 std::vector<double>* norms = nullptr) {
    auto net = make_net();
    std::vector<torch::Tensor> first, rest;
    split(net, two_groups, first, rest);
    auto optimizer = make_optimizer(first, rest, adam);
    train_reference(net, *optimizer, unused, clip, norms);
    return named(net);
  }
  void train_reference(torch::nn::Sequential net, torch::optim::Optimizer& optimizer, bool unused, double clip = 0,
                       std::vector<double>* norms = nullptr) {
    for (int step = 0; step < kSteps; ++step) {
      optimizer.zero_grad();
      for (int r = 0; r < group->size(); ++r) {
        set_use_second(net, uses_second(r, unused));
        (torch::mse_loss(net->forward(rows(x, r)), rows(y, r)) / group->size()).backward();
      }
      if (clip > 0) {
        const double norm = torch::nn::utils::clip_grad_norm_(net->parameters(), clip);
        if (norms != nullptr) norms->push_back(norm);
      }
      optimizer.step();
    }
  }
  static void set_use_second(const torch::nn::Sequential& net, bool use) {
    for (const auto& child : net->children()) {
      if (auto* unit = child->as<MaybeUnusedImpl>()) unit->use = use;
    }
  }
  static std::map<std::string, torch::Tensor> named(const torch::nn::Sequential& net) {
    std::map<std::string, torch::Tensor> result;
    for (const auto& item : net->named_parameters()) result[item.key()] = item.value().detach().clone();
    return result;
  }

  static void expect_same(const std::map<std::string, torch::Tensor>& expected,
                          const torch::OrderedDict<std::string, torch::Tensor>& actual) {
    for (const auto& [name, tensor] : expected) {
      const torch::Tensor* found = actual.find(name);
      ASSERT_NE(found, nullptr) << name;
      EXPECT_TRUE(torch::allclose(*found, tensor, 1e-5, 1e-6))
          << name << " differs by " << (*found - tensor).abs().max().item<double>();
    }
  }

  // All ranks hold the same whole model: rank 0's, everywhere.
  void expect_same_on_every_rank(const torch::OrderedDict<std::string, torch::Tensor>& full) {
    for (const auto& item : full) {
      torch::Tensor mine = item.value().clone();
      torch::Tensor root = mine.clone();
      group->broadcast(root);
      EXPECT_TRUE(torch::equal(mine, root)) << item.key() << " differs from rank 0's";
    }
  }
};

TEST_F(FullyShardedTest, TrainsAsTheReferenceWithAdamAndSgd) {
  for (const bool adam : {true, false}) {
    for (const bool two_groups : {false, true}) {
      SCOPED_TRACE(std::string(adam ? "Adam" : "SGD") + (two_groups ? ", two param groups" : ", one group"));
      auto net = make_net();
      std::vector<torch::Tensor> first, rest;
      split(net, two_groups, first, rest);
      auto optimizer = make_optimizer(first, rest, adam);  // over the model's own parameters
      acc::FullyShardedModel model(net, *group);
      model.shard_optimizer(*optimizer);
      ASSERT_EQ(model.units(), 3U);
      const int n = group->size();
      // Units of 7*9+9 = 72, 2*(9*5+5) = 100 and 5*3+3 = 18 elements.
      EXPECT_EQ(model.total_elements(), 190);
      EXPECT_EQ(model.shard_elements(), (72 + n - 1) / n + (100 + n - 1) / n + (18 + n - 1) / n);
      for (int step = 0; step < kSteps; ++step) {
        EXPECT_EQ(model.whole_parameter_bytes(), 0);
        auto loss = torch::mse_loss(model.forward(rows(x, group->rank())), rows(y, group->rank()));
        EXPECT_EQ(model.whole_parameter_bytes(), 0) << "a unit stayed whole after forward";
        loss.backward();
        EXPECT_EQ(model.whole_parameter_bytes(), 0) << "a unit stayed whole after backward";
        EXPECT_EQ(model.whole_gradient_bytes(), 0) << "a whole gradient was kept";
        for (const auto& shard : model.parameters()) EXPECT_TRUE(shard.grad().defined());
        optimizer->step();
        optimizer->zero_grad();
      }
      // The optimizer's state is for the shards only.
      std::int64_t state_elements = 0;
      for (const auto& [key, param_state] : optimizer->state()) {
        if (adam) {
          const auto& s = static_cast<const torch::optim::AdamParamState&>(*param_state);
          state_elements += s.exp_avg().numel() + s.exp_avg_sq().numel();
        } else {
          state_elements += static_cast<const torch::optim::SGDParamState&>(*param_state).momentum_buffer().numel();
        }
      }
      EXPECT_EQ(state_elements, (adam ? 2 : 1) * model.shard_elements());
      const auto full = model.full_state_dict();
      expect_same(reference(adam, two_groups, /*unused=*/false), full);
      expect_same_on_every_rank(full);
    }
  }
}

TEST_F(FullyShardedTest, FreesEachUnitAfterItsForwardAndBackward) {
  // Bytes of whole parameters (and gradients) seen at a probe between the
  // first unit and the second, in forward and in backward.
  std::vector<std::int64_t> forward_bytes, backward_bytes, backward_grads;
  acc::FullyShardedModel* model_seen = nullptr;
  auto net = make_net(true, [&](bool backward) {
    if (model_seen == nullptr) return;
    (backward ? backward_bytes : forward_bytes).push_back(model_seen->whole_parameter_bytes());
    if (backward) backward_grads.push_back(model_seen->whole_gradient_bytes());
  });
  acc::FullyShardedModel model(net, *group);
  model_seen = &model;
  torch::optim::SGD sgd(model.parameters(), 0.1);
  auto loss = torch::mse_loss(model.forward(rows(x, group->rank())), rows(y, group->rank()));
  loss.backward();
  sgd.step();
  ASSERT_EQ(forward_bytes.size(), 1U);
  ASSERT_EQ(backward_bytes.size(), 1U);
  const int n = group->size();
  if (n == 1) {
    EXPECT_EQ(forward_bytes[0], 0);  // one rank: the shards are the model
  } else {
    // Forward: unit 0 freed, unit 2 not gathered yet.
    EXPECT_EQ(forward_bytes[0], 0);
    // Backward: units 4 and 2 are done (their storage freed, their gradients
    // reduce-scattered); unit 0 is not gathered until its own backward.
    EXPECT_EQ(backward_bytes[0], 0);
    EXPECT_EQ(backward_grads[0], 0);
  }
}

TEST_F(FullyShardedTest, WithoutReshardAfterForwardUnitsStayWholeUntilTheirBackward) {
  auto net = make_net();
  auto optimizer = make_optimizer(net->parameters(), {}, /*adam=*/true);
  acc::FullyShardedModel model(net, *group, {.reshard_after_forward = false});
  model.shard_optimizer(*optimizer);
  const std::int64_t whole_model = model.total_elements() * static_cast<std::int64_t>(sizeof(float));
  for (int step = 0; step < kSteps; ++step) {
    auto loss = torch::mse_loss(model.forward(rows(x, group->rank())), rows(y, group->rank()));
    if (group->size() > 1) {
      // Every unit whole (each padded to a multiple of the ranks).
      EXPECT_GE(model.whole_parameter_bytes(), whole_model) << "a unit was freed after its forward";
    }
    loss.backward();
    EXPECT_EQ(model.whole_parameter_bytes(), 0) << "a unit stayed whole after its backward";
    EXPECT_EQ(model.whole_gradient_bytes(), 0) << "a whole gradient was kept";
    optimizer->step();
    optimizer->zero_grad();
  }
  // Without a backward to follow, units are freed after their forward as always.
  {
    torch::NoGradGuard no_grad;
    (void)model.forward(rows(x, group->rank()));
    EXPECT_EQ(model.whole_parameter_bytes(), 0);
  }
  expect_same(reference(/*adam=*/true, /*two_groups=*/false, /*unused=*/false), model.full_state_dict());
}

TEST_F(FullyShardedTest, ParameterUnusedOnOddRanks) {
  // Rank r's second layer of unit 2 joins in on even ranks only: on odd
  // ranks its gradient is zero in the average, and no rank waits for it.
  auto net = make_net(uses_second(group->rank(), true));
  acc::FullyShardedModel model(net, *group);
  torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
  for (int step = 0; step < kSteps; ++step) {
    auto loss = torch::mse_loss(model.forward(rows(x, group->rank())), rows(y, group->rank()));
    loss.backward();
    // A collective between backward and step meets the same one everywhere.
    auto total = loss.detach().clone();
    group->all_reduce(total);
    EXPECT_TRUE(std::isfinite(total.item<double>()));
    sgd.step();
    sgd.zero_grad();
  }
  auto reference_net = make_net();
  torch::optim::SGD reference_sgd(reference_net->parameters(),
                                  torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
  train_reference(reference_net, reference_sgd, /*unused=*/true);
  const auto expected = named(reference_net);
  const auto full = model.full_state_dict();
  expect_same(expected, full);
  expect_same_on_every_rank(full);
}

TEST_F(FullyShardedTest, AUnitSkippedOnOddRanks) {
  // The skipped unit's hook would otherwise run after the previous unit's on
  // odd ranks and before it on even ones: mismatched collectives.
  const auto make = [](bool skip) {
    torch::manual_seed(11);
    // No child between the first unit and the skipped one: passed through,
    // its output is the first unit's own.
    return torch::nn::Sequential(torch::nn::Linear(7, 9), MaybeSkip(skip), torch::nn::Linear(9, 3));
  };
  auto net = make(group->rank() % 2 == 1);
  acc::FullyShardedModel model(net, *group);
  torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto reference = make(false);
  torch::optim::SGD reference_sgd(reference->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < kSteps; ++step) {
    torch::mse_loss(model.forward(rows(x, group->rank())), rows(y, group->rank())).backward();
    sgd.step();
    sgd.zero_grad();
    reference_sgd.zero_grad();
    for (int r = 0; r < group->size(); ++r) {
      reference[1]->as<MaybeSkipImpl>()->skip = r % 2 == 1;
      (torch::mse_loss(reference->forward(rows(x, r)), rows(y, r)) / group->size()).backward();
    }
    reference_sgd.step();
  }
  const auto full = model.full_state_dict();
  expect_same(named(reference), full);
  expect_same_on_every_rank(full);
}

TEST_F(FullyShardedTest, FrozenUnitPassesItsGradientOn) {
  auto make = [] {
    torch::manual_seed(11);
    return torch::nn::Sequential(torch::nn::Linear(7, 9), torch::nn::Tanh(), torch::nn::Linear(9, 5),
                                 torch::nn::Linear(5, 3));
  };
  auto net = make();
  for (auto& p : net[2]->parameters()) p.set_requires_grad(false);
  acc::FullyShardedModel model(net, *group);
  torch::optim::SGD sgd(model.parameters(), 0.1);
  auto reference = make();
  for (auto& p : reference[2]->parameters()) p.set_requires_grad(false);
  std::vector<torch::Tensor> trainable;
  for (const auto& p : reference->parameters()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  torch::optim::SGD reference_sgd(trainable, 0.1);
  for (int step = 0; step < kSteps; ++step) {
    torch::mse_loss(model.forward(rows(x, group->rank())), rows(y, group->rank())).backward();
    EXPECT_EQ(model.whole_parameter_bytes(), 0);
    sgd.step();
    sgd.zero_grad();
    reference_sgd.zero_grad();
    for (int r = 0; r < group->size(); ++r) {
      (torch::mse_loss(reference->forward(rows(x, r)), rows(y, r)) / group->size()).backward();
    }
    reference_sgd.step();
  }
  expect_same(named(reference), model.full_state_dict());
  // The frozen unit is where it started.
  EXPECT_TRUE(torch::equal(model.full_state_dict()["2.weight"], make()[2]->parameters()[0].detach()));
}

TEST_F(FullyShardedTest, MicroStepsAccumulateLocally) {
  // Two micro-batches per step (each rank's rows halved), the first only
  // accumulating: the same step as the reference on the whole rows.
  bool sync = true;
  auto net = make_net();
  acc::FullyShardedModel model(net, *group, {.sync_in_backward = [&] { return sync; }});
  torch::optim::Adam adam(model.parameters(), torch::optim::AdamOptions(0.01).weight_decay(0.01));
  for (int step = 0; step < kSteps; ++step) {
    const auto mine_x = rows(x, group->rank());
    const auto mine_y = rows(y, group->rank());
    sync = false;
    (torch::mse_loss(model.forward(mine_x.narrow(0, 0, 3)), mine_y.narrow(0, 0, 3)) / 2).backward();
    if (group->size() > 1) EXPECT_GT(model.whole_gradient_bytes(), 0) << "a micro-step reduced its gradients";
    EXPECT_EQ(model.whole_parameter_bytes(), 0);
    sync = true;
    (torch::mse_loss(model.forward(mine_x.narrow(0, 3, 3)), mine_y.narrow(0, 3, 3)) / 2).backward();
    EXPECT_EQ(model.whole_gradient_bytes(), 0);
    adam.step();
    adam.zero_grad();
  }
  auto reference_net = make_net();
  torch::optim::Adam reference_adam(reference_net->parameters(), torch::optim::AdamOptions(0.01).weight_decay(0.01));
  train_reference(reference_net, reference_adam, /*unused=*/false);
  const auto expected = named(reference_net);
  expect_same(expected, model.full_state_dict());
}

TEST_F(FullyShardedTest, ClipsByTheWholeGradientsNorm) {
  auto net = make_net();
  auto optimizer = make_optimizer(net->parameters(), {}, /*adam=*/false);
  acc::FullyShardedModel model(net, *group);
  model.shard_optimizer(*optimizer);
  std::vector<double> norms;
  for (int step = 0; step < kSteps; ++step) {
    torch::mse_loss(model.forward(rows(x, group->rank())), rows(y, group->rank())).backward();
    norms.push_back(model.clip_grad_norm_(0.05));
    optimizer->step();
    optimizer->zero_grad();
  }
  std::vector<double> expected_norms;
  expect_same(reference(/*adam=*/false, /*two_groups=*/false, /*unused=*/false, 0.05, &expected_norms),
              model.full_state_dict());
  ASSERT_EQ(norms.size(), expected_norms.size());
  for (std::size_t k = 0; k < norms.size(); ++k) EXPECT_NEAR(norms[k], expected_norms[k], 1e-5 * expected_norms[k]);
  EXPECT_GT(expected_norms[0], 0.05);  // the clip was active
}

TEST_F(FullyShardedTest, FullStateDictRoundTrips) {
  auto net = make_net();
  acc::FullyShardedModel model(net, *group);
  auto full = model.full_state_dict();
  // Names and shapes of the Sequential's own state.
  const auto own = make_net()->named_parameters();
  ASSERT_EQ(full.size(), own.size());
  for (const auto& item : own) {
    ASSERT_NE(full.find(item.key()), nullptr) << item.key();
    EXPECT_TRUE(torch::equal(full[item.key()], item.value().detach())) << item.key();
  }
  // Another state, loaded: every rank copies its part, and the next gather
  // gives it back whole.
  torch::OrderedDict<std::string, torch::Tensor> other;
  for (const auto& item : full) other.insert(item.key(), torch::randn_like(item.value()));
  for (auto& item : other) group->broadcast(item.value());
  model.load_full_state_dict(other);
  const auto back = model.full_state_dict();
  for (const auto& item : other) EXPECT_TRUE(torch::equal(back[item.key()], item.value())) << item.key();
  // A missing tensor is named, and nothing is loaded.
  torch::OrderedDict<std::string, torch::Tensor> partial;
  partial.insert("0.weight", full["0.weight"]);
  EXPECT_NE(acc::testing::error_of([&] { model.load_full_state_dict(partial); }).find("0.bias"), std::string::npos);
  EXPECT_TRUE(torch::equal(model.full_state_dict()["0.weight"], other["0.weight"]));
  // Gathers nest: the parameters stay whole until the outer one is released.
  model.gather_full_parameters();
  model.gather_full_parameters();
  model.release_full_parameters(false);
  EXPECT_TRUE(torch::equal(net[0]->as<torch::nn::Linear>()->weight.detach(), other["0.weight"]));
  model.release_full_parameters(false);
  EXPECT_EQ(model.whole_parameter_bytes(), 0);
  // Written back: what the module holds when released becomes the shards.
  model.gather_full_parameters();
  net[0]->as<torch::nn::Linear>()->weight.detach().fill_(0.5);
  model.release_full_parameters(true);
  EXPECT_TRUE(torch::equal(model.full_state_dict()["0.weight"], torch::full({9, 7}, 0.5)));
}

TEST_F(FullyShardedTest, RefusesWhatCannotBeSharded) {
  {
    // Empty on every rank but rank 0, which loaded: every rank refuses, naming the first empty rank.
    auto net = acc::init_empty_weights([] { return make_net(); });
    if (group->rank() == 0 && group->size() > 1) net = make_net();
    const auto message = acc::testing::error_of([&] { acc::FullyShardedModel model(net, *group); });
    EXPECT_NE(message.find("on rank " + std::to_string(group->size() > 1 ? 1 : 0) +
                           " of its group, 0.weight is on the meta"),
              std::string::npos)
        << message;
  }
  {
    auto net = make_net();
    net[0]->as<torch::nn::Linear>()->bias.set_requires_grad(false);
    EXPECT_NE(acc::testing::error_of([&] { acc::FullyShardedModel model(net, *group); }).find("mixes trainable"),
              std::string::npos);
  }
  {
    auto net = make_net();
    torch::optim::LBFGS lbfgs(net->parameters());
    acc::FullyShardedModel model(net, *group);
    EXPECT_NE(acc::testing::error_of([&] { model.shard_optimizer(lbfgs); }).find("LBFGS"), std::string::npos);
  }
  {
    // A frozen unit, or only part of a unit, in the optimizer.
    auto net = make_net();
    for (auto& p : net[0]->parameters()) p.set_requires_grad(false);
    torch::optim::SGD frozen(net->parameters(), 0.1);
    acc::FullyShardedModel model(net, *group);
    EXPECT_NE(acc::testing::error_of([&] { model.shard_optimizer(frozen); }).find("frozen unit 0"), std::string::npos);
    torch::optim::SGD part({net[4]->as<torch::nn::Linear>()->weight}, 0.1);
    EXPECT_NE(acc::testing::error_of([&] { model.shard_optimizer(part); }).find("4.bias"), std::string::npos);
    // Built over the shards: kept as it is.
    std::vector<torch::Tensor> trainable;
    for (const auto& shard : model.parameters()) {
      if (shard.requires_grad()) trainable.push_back(shard);
    }
    torch::optim::SGD shards(trainable, 0.1);
    model.shard_optimizer(shards);
    EXPECT_EQ(shards.param_groups()[0].params().size(), 2U);
  }
  {
    // Unit 0's weight and bias in two param groups.
    auto net = make_net();
    std::vector<torch::Tensor> weight{net[0]->as<torch::nn::Linear>()->weight};
    std::vector<torch::Tensor> others;
    for (const auto& p : net->parameters()) {
      if (!p.is_same(weight[0])) others.push_back(p);
    }
    auto optimizer = make_optimizer(weight, others, true);
    acc::FullyShardedModel model(net, *group);
    EXPECT_NE(acc::testing::error_of([&] { model.shard_optimizer(*optimizer); }).find("one group"), std::string::npos);
  }
  {
    // Two forward passes into one backward.
    auto net = make_net();
    acc::FullyShardedModel model(net, *group);
    const auto mine = rows(x, group->rank());
    auto loss = model.forward(mine).sum() + model.forward(mine).sum();
    EXPECT_NE(acc::testing::error_of([&] { loss.backward(); }).find("one forward per backward"), std::string::npos);
    // The next step is clean.
    model.zero_grad();
    model.forward(mine).sum().backward();
    EXPECT_EQ(model.whole_parameter_bytes(), 0);
  }
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
