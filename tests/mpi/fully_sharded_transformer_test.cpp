// FULL_SHARD of a transformer written as LibTorch users write one (the GPT
// of jobs/gpt: custom modules, a ModuleList of blocks taking a mask, a head
// tied to the embedding), at 1, 2 and 4 ranks, against a reference trained
// in this process on every rank's data: units chosen by class, by size, by
// the user's marking or none train to the reference, the tied
// weight stepped once; each block is whole only around its own forward and
// backward; a unit whose forward does not mark itself is named in a
// ConfigError before anything reads freed memory.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"
#include "accelerate/training/fully_sharded_model.hpp"
#include "accelerate/training/sharded_unit_scope.hpp"
#include "common/test_helpers.hpp"
#include "common/world_group.hpp"
#include "../../jobs/gpt/gpt_model.hpp"  // the job's model, as its users write it

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;

constexpr int kSteps = 3;
constexpr std::int64_t kRowsPerRank = 2;
const gpt::GptConfig kConfig{.vocab = 37, .sequence = 8, .d_model = 16, .heads = 2, .layers = 3};

gpt::Gpt make_gpt() {
  torch::manual_seed(3);
  return gpt::Gpt(kConfig);
}

// Each distinct parameter once: what an optimizer of the unsharded model steps.
std::vector<torch::Tensor> distinct_parameters(const gpt::Gpt& net) {
  std::vector<torch::Tensor> distinct;
  for (const auto& named : net->named_parameters()) {
    if (named.key() != "lm_head.weight") distinct.push_back(named.value());
  }
  return distinct;
}

torch::Tensor loss_of(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::cross_entropy_loss(logits.reshape({-1, kConfig.vocab}), targets.reshape({-1}));
}

class FullyShardedTransformerTest : public ::testing::Test {
 protected:
  acc::State state;
  std::unique_ptr<acc::ProcessGroup> group = acc::testing::world_group(state);
  torch::Tensor tokens, targets, mask;

  void SetUp() override {
    torch::manual_seed(9);
    const std::int64_t rows = kRowsPerRank * group->size();
    tokens = torch::randint(kConfig.vocab, {rows, kConfig.sequence});
    targets = torch::randint(kConfig.vocab, {rows, kConfig.sequence});
    mask = torch::ones({rows, kConfig.sequence}, torch::kLong);
    mask.narrow(1, kConfig.sequence - 2, 2).narrow(0, 0, 1).zero_();  // one row padded at its end
  }
  [[nodiscard]] torch::Tensor rows(const torch::Tensor& t, int rank) const {
    return t.narrow(0, kRowsPerRank * rank, kRowsPerRank);
  }

  // One process, every rank's loss, the gradients averaged, Adam over the distinct parameters.
  std::map<std::string, torch::Tensor> reference() {
    auto net = make_gpt();
    torch::optim::Adam adam(distinct_parameters(net), torch::optim::AdamOptions(1e-2));
    for (int step = 0; step < kSteps; ++step) {
      adam.zero_grad();
      for (int r = 0; r < group->size(); ++r) {
        (loss_of(net->forward(rows(tokens, r), rows(mask, r)), rows(targets, r)) / group->size()).backward();
      }
      adam.step();
    }
    std::map<std::string, torch::Tensor> result;
    for (const auto& item : net->named_parameters()) result[item.key()] = item.value().detach().clone();
    return result;
  }

  // The same steps, sharded by `units`; returns the whole model at the end.
  torch::OrderedDict<std::string, torch::Tensor> sharded(const acc::UnitPolicy& units,
                                                         std::vector<std::string>* unit_names = nullptr) {
    auto net = make_gpt();
    acc::FullyShardedModel model(net.ptr(), *group, {.units = units});
    if (unit_names != nullptr) *unit_names = model.unit_names();
    torch::optim::Adam adam(model.parameters(), torch::optim::AdamOptions(1e-2));
    const int rank = group->rank();
    for (int step = 0; step < kSteps; ++step) {
      adam.zero_grad();
      model.begin_forward();
      const torch::Tensor logits = net->forward(rows(tokens, rank), rows(mask, rank));
      model.end_forward();
      loss_of(logits, rows(targets, rank)).backward();
      EXPECT_EQ(model.whole_parameter_bytes(), 0) << "step " << step;
      adam.step();
    }
    return model.full_state_dict();
  }

  static void expect_same(const std::map<std::string, torch::Tensor>& expected,
                          const torch::OrderedDict<std::string, torch::Tensor>& actual) {
    for (const auto& [name, tensor] : expected) {
      const torch::Tensor* found = actual.find(name);
      ASSERT_NE(found, nullptr) << name;
      EXPECT_TRUE(torch::allclose(*found, tensor, 1e-4, 1e-5))
          << name << " differs by " << (*found - tensor).abs().max().item<double>();
    }
    // The tied weight was stepped once, and is one tensor again.
    EXPECT_TRUE(torch::equal(*actual.find("lm_head.weight"), *actual.find("wte.weight")));
  }
};

TEST_F(FullyShardedTransformerTest, UnitsByClassTrainAsTheReference) {
  std::vector<std::string> names;
  expect_same(reference(), sharded(acc::UnitPolicy::by_class({"Block"}), &names));
  // The root (embeddings, final LayerNorm, tied head) first, then each block.
  EXPECT_EQ(names, (std::vector<std::string>{"", "blocks.0", "blocks.1", "blocks.2"}));
}

TEST_F(FullyShardedTransformerTest, UnitsMarkedByTheUserTrainAsTheReference) {
  // The user marks blocks 0 and 2 by name; block 1 stays in the root unit.
  std::vector<std::string> names;
  const auto policy = acc::UnitPolicy::by_predicate([](const std::string& name, const torch::nn::Module&) {
    return name == "blocks.0" || name == "blocks.2";
  });
  expect_same(reference(), sharded(policy, &names));
  EXPECT_EQ(names, (std::vector<std::string>{"", "blocks.0", "blocks.2"}));
}

TEST_F(FullyShardedTransformerTest, UnitsBySizeAndNoUnitsTrainAsTheReference) {
  const auto expected = reference();
  std::vector<std::string> names;
  // A block holds 3,232 parameters at d = 16; the root's embeddings 720.
  expect_same(expected, sharded(acc::UnitPolicy::by_size(3000), &names));
  EXPECT_EQ(names, (std::vector<std::string>{"", "blocks.0", "blocks.1", "blocks.2"}));
  expect_same(expected, sharded(acc::UnitPolicy::none(), &names));
  EXPECT_EQ(names, (std::vector<std::string>{""}));
}

TEST_F(FullyShardedTransformerTest, ABlockIsWholeOnlyAroundItsOwnForward) {
  auto net = make_gpt();
  acc::FullyShardedModel model(net.ptr(), *group, {.units = acc::UnitPolicy::by_class({"Block"})});
  const int rank = group->rank();
  for (int step = 0; step < 2; ++step) {  // the first forward holds every unit whole; the second does not
    model.begin_forward();
    const torch::Tensor logits = net->forward(rows(tokens, rank), rows(mask, rank));
    model.end_forward();
    // Between forward and backward only the root is whole.
    std::int64_t root_bytes = 0;
    for (const auto& name : {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"}) {
      root_bytes += net->named_parameters()[name].numel() * 4;
    }
    if (group->size() > 1) {
      EXPECT_GE(model.whole_parameter_bytes(), root_bytes);
      EXPECT_LT(model.whole_parameter_bytes(), root_bytes + 64) << "step " << step;  // the root's padding
    }
    loss_of(logits, rows(targets, rank)).backward();
    EXPECT_EQ(model.whole_parameter_bytes(), 0);
    EXPECT_EQ(model.whole_gradient_bytes(), 0);
    model.zero_grad();
  }
}

// Units inside units: each Outer holds an Inner, both marked.
struct InnerImpl : torch::nn::Module {
  InnerImpl() : fc(register_module("fc", torch::nn::Linear(6, 6))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    acc::ShardedUnitScope unit(*this);
    return unit.output(torch::tanh(fc(x)));
  }
  torch::nn::Linear fc;
};
TORCH_MODULE(Inner);

struct OuterImpl : torch::nn::Module {
  OuterImpl()
      : before(register_module("before", torch::nn::Linear(6, 6))),
        inner(register_module("inner", Inner())),
        after(register_module("after", torch::nn::Linear(6, 6))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    acc::ShardedUnitScope unit(*this);
    return unit.output(x + after(inner(before(x))));
  }
  torch::nn::Linear before;
  Inner inner;
  torch::nn::Linear after;
};
TORCH_MODULE(Outer);

struct NestedNetImpl : torch::nn::Module {
  NestedNetImpl()
      : first(register_module("first", Outer())),
        second(register_module("second", Outer())),
        head(register_module("head", torch::nn::Linear(6, 2))) {}
  torch::Tensor forward(const torch::Tensor& x) { return head(second(first(x))); }
  Outer first, second;
  torch::nn::Linear head;
};

TEST_F(FullyShardedTransformerTest, NestedUnitsTrainAsTheReference) {
  torch::manual_seed(4);
  const auto x = torch::randn({3 * group->size(), 6});
  const auto y = torch::randn({3 * group->size(), 2});
  const auto part = [](const torch::Tensor& t, int r) { return t.narrow(0, 3 * r, 3); };
  const auto make = [] {
    torch::manual_seed(8);
    return std::make_shared<NestedNetImpl>();
  };
  auto reference = make();
  torch::optim::SGD sgd(reference->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto net = make();
  acc::FullyShardedModel model(net, *group, {.units = acc::UnitPolicy::by_class({"Outer", "Inner"})});
  EXPECT_EQ(model.unit_names(), (std::vector<std::string>{"", "first", "first.inner", "second", "second.inner"}));
  torch::optim::SGD sharded_sgd(model.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < kSteps; ++step) {
    sgd.zero_grad();
    for (int r = 0; r < group->size(); ++r) {
      (torch::mse_loss(reference->forward(part(x, r)), part(y, r)) / group->size()).backward();
    }
    sgd.step();
    sharded_sgd.zero_grad();
    model.begin_forward();
    const auto out = net->forward(part(x, group->rank()));
    model.end_forward();
    torch::mse_loss(out, part(y, group->rank())).backward();
    EXPECT_EQ(model.whole_parameter_bytes(), 0);
    sharded_sgd.step();
  }
  const auto full = model.full_state_dict();
  for (const auto& item : reference->named_parameters()) {
    EXPECT_TRUE(torch::allclose(full[item.key()], item.value(), 1e-5, 1e-6)) << item.key();
  }
}

// A unit class whose forward does not say where it begins: named, not read freed.
struct UnmarkedImpl : torch::nn::Module {
  UnmarkedImpl() : fc(register_module("fc", torch::nn::Linear(4, 4))) {}
  torch::Tensor forward(const torch::Tensor& x) { return fc(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Unmarked);

// One that says where it begins but not what it returns.
struct NoOutputImpl : torch::nn::Module {
  NoOutputImpl() : fc(register_module("fc", torch::nn::Linear(4, 4))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    acc::ShardedUnitScope unit(*this);
    return fc(x);
  }
  torch::nn::Linear fc;
};
TORCH_MODULE(NoOutput);

template <class Layer>
struct TwoLayersImpl : torch::nn::Module {
  TwoLayersImpl() : a(register_module("a", Layer())), b(register_module("b", torch::nn::Linear(4, 2))) {}
  torch::Tensor forward(const torch::Tensor& x) { return b(a(x)); }
  Layer a;
  torch::nn::Linear b;
};

TEST_F(FullyShardedTransformerTest, AUnitThatDoesNotMarkItsForwardIsNamed) {
  const auto x = torch::randn({3, 4});
  {
    auto net = std::make_shared<TwoLayersImpl<Unmarked>>();
    acc::FullyShardedModel model(net, *group, {.units = acc::UnitPolicy::by_class({"Unmarked"})});
    for (int attempt = 0; attempt < 2; ++attempt) {  // refused each time, never run on freed memory
      model.begin_forward();
      const auto y = net->forward(x);
      const auto message = acc::testing::error_of([&] { model.end_forward(); });
      EXPECT_NE(message.find("without entering unit(s) a (UnmarkedImpl)"), std::string::npos) << message;
      EXPECT_NE(message.find("ShardedUnitScope unit(*this);"), std::string::npos) << message;
    }
    EXPECT_EQ(model.whole_parameter_bytes(), 0);
  }
  {
    auto net = std::make_shared<TwoLayersImpl<NoOutput>>();
    acc::FullyShardedModel model(net, *group, {.units = acc::UnitPolicy::by_class({"NoOutput"})});
    model.begin_forward();
    const auto y = net->forward(x);
    const auto message = acc::testing::error_of([&] { model.end_forward(); });
    EXPECT_NE(message.find("unit(s) a ended without unit.output(...)"), std::string::npos) << message;
    // Without gradients there is no backward to prepare for: accepted.
    torch::NoGradGuard no_grad;
    model.begin_forward();
    (void)net->forward(x);
    model.end_forward();
  }
  {
    // The Sequential's forward(x) replay is for a Sequential only.
    auto net = make_gpt();
    acc::FullyShardedModel model(net.ptr(), *group);
    const auto message = acc::testing::error_of([&] { (void)model.forward(tokens); });
    EXPECT_NE(message.find("GptImpl"), std::string::npos) << message;
  }
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
