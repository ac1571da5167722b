// FlatParameters and the fused optimizers (FusedSGD, FusedAdam, FusedAdamW)
// against torch::optim's SGD, Adam and AdamW:
//  - FlatParameters: every parameter's data and .grad are ranges of one flat
//    buffer per (dtype, device), values kept, backward accumulating into the
//    flat gradient, a tied tensor taken once, a parameter pointed away put back;
//  - each optimizer, with weight decay and its variants (momentum, dampening,
//    nesterov; amsgrad), in float32, float64 and bfloat16, steps a small model
//    with parameters of several shapes as torch::optim steps an identical one:
//    the parameters agree after every step, to rounding;
//  - a tied weight is stepped once, as torch::optim over the distinct tensors;
//  - the per-parameter state sits in state() under torch::optim's keys and
//    types, as ranges of flat buffers;
//  - torch::save / torch::load: a resumed run ends where the uninterrupted one
//    does, and a FusedAdamW checkpoint continues in torch::optim::AdamW and
//    the other way round;
//  - a gradient set to none skips its parameter, as in torch::optim.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "accelerate/error.hpp"
#include "accelerate/training/flat_parameters.hpp"
#include "accelerate/training/fused_optimizers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
namespace optim = torch::optim;

constexpr int kSteps = 6;

// Parameters of several shapes and kinds: matrices, biases, a LayerNorm's
// affine pair, a 3-d tensor and a scalar-like one, all in the loss.
struct Net : torch::nn::Module {
  Net() {
    torch::manual_seed(11);
    first = register_module("first", torch::nn::Linear(6, 9));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({9})));
    second = register_module("second", torch::nn::Linear(9, 4));
    cube = register_parameter("cube", torch::randn({3, 2, 5}));
    scale = register_parameter("scale", torch::ones({1}));
    torch::nn::init::normal_(norm->weight, 1.0, 0.2);
    torch::nn::init::normal_(norm->bias, 0.0, 0.2);
  }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y) {
    const auto out = second->forward(norm->forward(torch::tanh(first->forward(x)))) * scale;
    return (out - y).pow(2).mean() + 0.1 * (cube.to(x.scalar_type()).pow(2) * 0.3).sum().sin();
  }
  torch::nn::Linear first{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear second{nullptr};
  torch::Tensor cube;
  torch::Tensor scale;
};

std::pair<torch::Tensor, torch::Tensor> batch(int step, torch::Dtype dtype) {
  torch::manual_seed(100 + step);
  return {torch::randn({8, 6}).to(dtype), torch::randn({8, 4}).to(dtype)};
}

std::shared_ptr<Net> make_net(torch::Dtype dtype) {
  auto net = std::make_shared<Net>();
  net->to(dtype);
  return net;
}

// One kind of optimizer with its options, built fused or as torch::optim's.
struct Case {
  std::string name;
  std::function<std::unique_ptr<optim::Optimizer>(std::vector<torch::Tensor>, bool fused)> make;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  const auto sgd = [&](const std::string& name, optim::SGDOptions options) {
    all.push_back(
        Case{name, [options](std::vector<torch::Tensor> params, bool fused) -> std::unique_ptr<optim::Optimizer> {
               if (fused) return std::make_unique<acc::FusedSGD>(std::move(params), options);
               return std::make_unique<optim::SGD>(std::move(params), options);
             }});
  };
  const auto adam = [&](const std::string& name, optim::AdamOptions options) {
    all.push_back(
        Case{name, [options](std::vector<torch::Tensor> params, bool fused) -> std::unique_ptr<optim::Optimizer> {
               if (fused) return std::make_unique<acc::FusedAdam>(std::move(params), options);
               return std::make_unique<optim::Adam>(std::move(params), options);
             }});
  };
  const auto adamw = [&](const std::string& name, optim::AdamWOptions options) {
    all.push_back(
        Case{name, [options](std::vector<torch::Tensor> params, bool fused) -> std::unique_ptr<optim::Optimizer> {
               if (fused) return std::make_unique<acc::FusedAdamW>(std::move(params), options);
               return std::make_unique<optim::AdamW>(std::move(params), options);
             }});
  };
  sgd("SGD", optim::SGDOptions(0.05).weight_decay(0.01));
  sgd("SGD_momentum_dampening", optim::SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(0.01));
  sgd("SGD_nesterov", optim::SGDOptions(0.05).momentum(0.8).nesterov(true).weight_decay(0.02));
  adam("Adam", optim::AdamOptions(0.01).weight_decay(0.01));
  adam("Adam_amsgrad", optim::AdamOptions(0.01).betas({0.8, 0.95}).eps(1e-6).weight_decay(0.02).amsgrad(true));
  adamw("AdamW", optim::AdamWOptions(0.01).weight_decay(0.1));
  adamw("AdamW_amsgrad", optim::AdamWOptions(0.02).betas({0.85, 0.99}).weight_decay(0.05).amsgrad(true));
  return all;
}

struct Tolerance {
  double rtol;
  double atol;
};

Tolerance tolerance_for(torch::Dtype dtype) {
  if (dtype == torch::kDouble) return {1e-12, 1e-13};
  if (dtype == torch::kFloat) return {1e-5, 1e-6};
  // bfloat16: LibTorch rounds every intermediate to 8 bits of mantissa, the
  // fused step only the results, so the two differ by an ulp or two.
  return {2e-2, 2e-2};
}

void expect_close(const std::vector<torch::Tensor>& actual, const std::vector<torch::Tensor>& expected, Tolerance tol,
                  const std::string& when) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t p = 0; p < expected.size(); ++p) {
    const auto a = actual[p].detach().to(torch::kDouble);
    const auto e = expected[p].detach().to(torch::kDouble);
    EXPECT_TRUE(torch::allclose(a, e, tol.rtol, tol.atol))
        << when << ": parameter " << p << " differs by " << (a - e).abs().max().item<double>();
  }
}

// Where `parameter`'s range starts in the group's values (or, with `grads`,
// its gradients).
const char* range_start(const acc::FlatParameters::Group& group, const torch::Tensor& parameter, bool grads = false) {
  for (std::size_t i = 0; i < group.parameters.size(); ++i) {
    if (group.parameters[i].is_same(parameter)) {
      const auto& base = grads ? group.grads : group.values;
      return static_cast<const char*>(base.data_ptr()) + group.offsets[i] * base.element_size();
    }
  }
  return nullptr;
}

class FusedAgainstTorch : public ::testing::TestWithParam<std::tuple<std::size_t, torch::Dtype>> {};

TEST_P(FusedAgainstTorch, ParametersAgreeAfterEveryStep) {
  const auto [index, dtype] = GetParam();
  const Case kind = cases()[index];
  SCOPED_TRACE(kind.name);
  auto fused_net = make_net(dtype);
  auto torch_net = make_net(dtype);
  auto fused = kind.make(fused_net->parameters(), true);
  auto reference = kind.make(torch_net->parameters(), false);
  expect_close(fused_net->parameters(), torch_net->parameters(), {0, 0}, "before the first step");
  for (int step = 0; step < kSteps; ++step) {
    const auto [x, y] = batch(step, dtype);
    fused->zero_grad();
    reference->zero_grad();
    fused_net->loss(x, y).backward();
    torch_net->loss(x, y).backward();
    fused->step();
    reference->step();
    expect_close(fused_net->parameters(), torch_net->parameters(), tolerance_for(dtype),
                 "after step " + std::to_string(step + 1));
    if (HasFailure()) return;
  }
  EXPECT_EQ(fused->state().size(), reference->state().size());
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::size_t, torch::Dtype>>& info) {
  const auto dtype = std::get<1>(info.param);
  return cases()[std::get<0>(info.param)].name + "_" +
         (dtype == torch::kFloat    ? "float32"
          : dtype == torch::kDouble ? "float64"
                                    : "bfloat16");
}

INSTANTIATE_TEST_SUITE_P(AllKinds, FusedAgainstTorch,
                         ::testing::Combine(::testing::Range<std::size_t>(0, 7),
                                            ::testing::Values(torch::kFloat, torch::kDouble, torch::kBFloat16)),
                         case_name);

TEST(FlatParameters, ParametersAndGradientsAreRangesOfOneBufferPerDtype) {
  auto net = make_net(torch::kFloat);
  net->cube.set_data(net->cube.detach().to(torch::kDouble));  // a second dtype
  std::vector<torch::Tensor> before;
  for (const auto& p : net->parameters()) before.push_back(p.detach().clone());
  acc::FlatParameters flat(net->parameters());
  ASSERT_EQ(flat.groups().size(), 2U);
  EXPECT_EQ(flat.size(), net->parameters().size());
  // Groups in the order their dtypes are first met: the module's own
  // parameters (cube, then scale) come before its children's.
  const auto& doubles = flat.groups()[0];
  const auto& floats = flat.groups()[1];
  EXPECT_EQ(doubles.values.scalar_type(), torch::kDouble);
  ASSERT_EQ(doubles.parameters.size(), 1U);
  EXPECT_TRUE(doubles.parameters[0].is_same(net->cube));
  EXPECT_EQ(floats.values.scalar_type(), torch::kFloat);
  EXPECT_EQ(floats.parameters.size(), 7U);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < floats.parameters.size(); ++i) {
    const auto& p = floats.parameters[i];
    EXPECT_EQ(floats.offsets[i], offset);
    EXPECT_EQ(p.data_ptr(), range_start(floats, p)) << "parameter " << i;
    EXPECT_EQ(p.grad().data_ptr(), range_start(floats, p, true)) << "gradient " << i;
    EXPECT_EQ(range_start(floats, p), static_cast<const char*>(floats.values.data_ptr()) + offset * 4);
    EXPECT_TRUE(p.is_leaf());
    EXPECT_TRUE(p.requires_grad());
    offset += p.numel();
  }
  EXPECT_EQ(floats.numel(), offset);
  const auto after = net->parameters();
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(after[i], before[i])) << "values of " << i;

  // Backward accumulates into the flat gradient; zero_grad clears it in place.
  const auto [x, y] = batch(0, torch::kFloat);
  net->loss(x, y).backward();
  const auto once = floats.grads.clone();
  EXPECT_GT(once.abs().sum().item<double>(), 0.0);
  net->loss(x, y).backward();
  EXPECT_TRUE(torch::allclose(floats.grads, 2 * once, 1e-6, 1e-7));
  flat.zero_grad();
  EXPECT_EQ(floats.grads.abs().sum().item<double>(), 0.0);

  // A gradient replaced by another tensor is copied back and linked again.
  net->first->weight.mutable_grad() = torch::full_like(net->first->weight, 3.0);
  EXPECT_EQ(flat.link_gradients(), 1U);
  EXPECT_EQ(net->first->weight.grad().data_ptr(), range_start(floats, net->first->weight, true));
  EXPECT_TRUE(torch::equal(net->first->weight.grad(), torch::full_like(net->first->weight, 3.0)));

  // A parameter pointed away (an assigning load) is put back with its new values.
  {
    torch::NoGradGuard no_grad;
    net->first->bias.set_data(torch::full({9}, 7.0F));
  }
  EXPECT_EQ(flat.keep_aliased(), 1U);
  EXPECT_EQ(net->first->bias.data_ptr(), range_start(floats, net->first->bias));
  EXPECT_TRUE(torch::equal(net->first->bias, torch::full({9}, 7.0F)));
  // Changing its size is refused.
  {
    torch::NoGradGuard no_grad;
    net->first->bias.set_data(torch::zeros({4}));
  }
  EXPECT_THROW(flat.keep_aliased(), acc::ConfigError);
}

TEST(FlatParameters, ATiedTensorIsTakenOnceAndFrozenParametersGetNoGradient) {
  auto embedding = torch::randn({5, 3}, torch::requires_grad());
  auto frozen = torch::randn({4});
  acc::FlatParameters flat({embedding, frozen, embedding});
  ASSERT_EQ(flat.groups().size(), 1U);
  EXPECT_EQ(flat.groups()[0].parameters.size(), 2U);
  EXPECT_EQ(flat.groups()[0].numel(), 19);
  EXPECT_TRUE(flat.holds(embedding));
  EXPECT_TRUE(flat.built_from({embedding, frozen}));
  EXPECT_FALSE(flat.built_from({frozen, embedding}));
  EXPECT_TRUE(embedding.grad().defined());
  EXPECT_FALSE(frozen.grad().defined());
}

TEST(FlatParameters, MetaTensorsAreRefused) {
  auto meta = torch::empty({3}, torch::TensorOptions().device(torch::kMeta));
  EXPECT_THROW(acc::FlatParameters({meta}), acc::ConfigError);
}

TEST(FusedAdamW, AModelCastAfterTheOptimizerWasBuiltTrainsAsWithTorch) {
  // As Accelerator::prepare moves a model built on the CPU: the optimizer
  // first, then the model's parameters replaced by copies elsewhere.
  auto fused_net = make_net(torch::kFloat);
  auto torch_net = make_net(torch::kFloat);
  acc::FusedAdamW fused(fused_net->parameters(), optim::AdamWOptions(0.01).weight_decay(0.1));
  optim::AdamW reference(torch_net->parameters(), optim::AdamWOptions(0.01).weight_decay(0.1));
  fused_net->to(torch::kDouble);
  torch_net->to(torch::kDouble);
  for (int step = 0; step < kSteps; ++step) {
    const auto [x, y] = batch(step, torch::kDouble);
    fused.zero_grad();
    reference.zero_grad();
    fused_net->loss(x, y).backward();
    torch_net->loss(x, y).backward();
    fused.step();
    reference.step();
    expect_close(fused_net->parameters(), torch_net->parameters(), tolerance_for(torch::kDouble),
                 "after step " + std::to_string(step + 1));
  }
  // The flat storage followed the parameters.
  const auto& flat = fused.flat_parameters().front();
  ASSERT_EQ(flat.groups().size(), 1U);
  EXPECT_EQ(flat.groups().front().values.scalar_type(), torch::kDouble);
  EXPECT_EQ(fused_net->first->weight.data_ptr(), range_start(flat.groups().front(), fused_net->first->weight));
  EXPECT_EQ(fused_net->first->weight.grad().data_ptr(),
            range_start(flat.groups().front(), fused_net->first->weight, true));
}

// A language model whose head is the embedding's weight, registered under both names.
struct TiedHead : torch::nn::Module {
  explicit TiedHead(const torch::Tensor& tied) { weight = register_parameter("weight", tied); }
  torch::Tensor weight;
};

struct TiedLm : torch::nn::Module {
  TiedLm() {
    torch::manual_seed(5);
    wte = register_module("wte", torch::nn::Embedding(11, 4));
    mixer = register_module("mixer", torch::nn::Linear(4, 4));
    head = register_module("head", std::make_shared<TiedHead>(wte->weight));
  }
  torch::Tensor loss(const torch::Tensor& tokens, const torch::Tensor& targets) {
    const auto logits = torch::linear(torch::tanh(mixer->forward(wte->forward(tokens))), head->weight);
    return torch::nn::functional::cross_entropy(logits, targets);
  }
  torch::nn::Embedding wte{nullptr};
  torch::nn::Linear mixer{nullptr};
  std::shared_ptr<TiedHead> head;
};

TEST(FusedAdamW, ATiedWeightIsSteppedOnceAsTorchOverTheDistinctTensors) {
  TiedLm fused_net;
  TiedLm torch_net;
  ASSERT_EQ(fused_net.parameters().size(), 4U);  // the tie listed twice
  acc::FusedAdamW fused(fused_net.parameters(), optim::AdamWOptions(0.05).weight_decay(0.1));
  EXPECT_EQ(fused.param_groups().front().params().size(), 3U);
  optim::AdamW reference({torch_net.wte->weight, torch_net.mixer->weight, torch_net.mixer->bias},
                         optim::AdamWOptions(0.05).weight_decay(0.1));
  for (int step = 0; step < kSteps; ++step) {
    torch::manual_seed(40 + step);
    const auto tokens = torch::randint(11, {7}, torch::kLong);
    const auto targets = torch::randint(11, {7}, torch::kLong);
    fused.zero_grad();
    reference.zero_grad();
    fused_net.loss(tokens, targets).backward();
    torch_net.loss(tokens, targets).backward();
    fused.step();
    reference.step();
  }
  EXPECT_TRUE(fused_net.head->weight.is_same(fused_net.wte->weight));
  expect_close(fused_net.parameters(), torch_net.parameters(), tolerance_for(torch::kFloat), "at the end");
}

// The optimizer's state of `parameter`, looked up under torch::optim's key: the
// TensorImpl's address printed (LibTorch 1.x) or the address itself (2.x).
template <class OptimizerT>
const optim::OptimizerParamState* state_of(const OptimizerT& optimizer, const torch::Tensor& parameter) {
  const auto& states = optimizer.state();
  using Key = typename std::decay_t<decltype(states)>::key_type;
  const auto found = [&] {
    if constexpr (std::is_same_v<Key, std::string>) {
      std::ostringstream key;
      key << parameter.unsafeGetTensorImpl();
      return states.find(key.str());
    } else {
      return states.find(static_cast<Key>(parameter.unsafeGetTensorImpl()));
    }
  }();
  return found == states.end() ? nullptr : found->second.get();
}

TEST(FusedAdamW, StateSitsInStateUnderTorchKeysAsRangesOfFlatBuffers) {
  auto net = make_net(torch::kFloat);
  acc::FusedAdamW fused(net->parameters(), optim::AdamWOptions(0.01).amsgrad(true));
  EXPECT_TRUE(fused.state().empty());  // as torch::optim: created by the first step
  const auto [x, y] = batch(0, torch::kFloat);
  net->loss(x, y).backward();
  fused.step();
  fused.step();
  const auto params = net->parameters();
  ASSERT_EQ(fused.state().size(), params.size());
  const char* previous_end = nullptr;
  for (const auto& p : params) {
    const auto* found = state_of(fused, p);
    ASSERT_NE(found, nullptr);
    const auto& state = dynamic_cast<const optim::AdamWParamState&>(*found);
    EXPECT_EQ(state.step(), 2);
    EXPECT_EQ(state.exp_avg().sizes(), p.sizes());
    EXPECT_TRUE(state.max_exp_avg_sq().defined());
    const char* begin = static_cast<const char*>(state.exp_avg().data_ptr());
    if (previous_end != nullptr) EXPECT_EQ(begin, previous_end) << "exp_avg ranges back to back";
    previous_end = begin + p.numel() * 4;
  }
}

// Saves an optimizer with torch::save and returns the bytes.
std::string saved(const optim::Optimizer& optimizer) {
  std::ostringstream out;
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  archive.save_to(out);
  return out.str();
}

void load(optim::Optimizer& optimizer, const std::string& bytes) {
  std::istringstream in(bytes);
  torch::serialize::InputArchive archive;
  archive.load_from(in);
  optimizer.load(archive);
}

// Runs steps [from, to) of AdamW on a net (fused or not), optionally from
// saved parameters and optimizer state; returns the parameters and the state.
struct Snapshot {
  std::vector<torch::Tensor> parameters;
  std::string optimizer;
};

Snapshot adamw_run(bool fused, int from, int to, const Snapshot* resume = nullptr) {
  auto net = make_net(torch::kFloat);
  if (resume != nullptr) {
    torch::NoGradGuard no_grad;
    const auto params = net->parameters();
    for (std::size_t i = 0; i < params.size(); ++i) params[i].copy_(resume->parameters[i]);
  }
  const auto options = optim::AdamWOptions(0.01).weight_decay(0.1).amsgrad(true);
  std::unique_ptr<optim::Optimizer> optimizer;
  if (fused) {
    optimizer = std::make_unique<acc::FusedAdamW>(net->parameters(), options);
  } else {
    optimizer = std::make_unique<optim::AdamW>(net->parameters(), options);
  }
  if (resume != nullptr) load(*optimizer, resume->optimizer);
  for (int step = from; step < to; ++step) {
    const auto [x, y] = batch(step, torch::kFloat);
    optimizer->zero_grad();
    net->loss(x, y).backward();
    optimizer->step();
  }
  Snapshot snapshot;
  for (const auto& p : net->parameters()) snapshot.parameters.push_back(p.detach().clone());
  snapshot.optimizer = saved(*optimizer);
  return snapshot;
}

TEST(FusedAdamW, AResumedRunEndsWhereTheUninterruptedOneEnds) {
  const Snapshot whole = adamw_run(true, 0, kSteps);
  const Snapshot half = adamw_run(true, 0, kSteps / 2);
  const Snapshot resumed = adamw_run(true, kSteps / 2, kSteps, &half);
  for (std::size_t i = 0; i < whole.parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed.parameters[i], whole.parameters[i])) << "parameter " << i;
  }
}

TEST(FusedAdamW, CheckpointsCrossToTorchAdamWAndBack) {
  const Snapshot whole = adamw_run(true, 0, kSteps);
  const Snapshot torch_whole = adamw_run(false, 0, kSteps);
  // FusedAdamW's checkpoint continued by torch::optim::AdamW.
  const Snapshot fused_half = adamw_run(true, 0, kSteps / 2);
  const Snapshot in_torch = adamw_run(false, kSteps / 2, kSteps, &fused_half);
  expect_close(in_torch.parameters, whole.parameters, tolerance_for(torch::kFloat), "FusedAdamW then AdamW");
  // torch::optim::AdamW's checkpoint continued by FusedAdamW.
  const Snapshot torch_half = adamw_run(false, 0, kSteps / 2);
  const Snapshot in_fused = adamw_run(true, kSteps / 2, kSteps, &torch_half);
  expect_close(in_fused.parameters, torch_whole.parameters, tolerance_for(torch::kFloat), "AdamW then FusedAdamW");
}

TEST(FusedSGD, AResumedRunWithMomentumEndsWhereTheUninterruptedOneEnds) {
  const auto run = [](int from, int to, const Snapshot* resume) {
    auto net = make_net(torch::kDouble);
    if (resume != nullptr) {
      torch::NoGradGuard no_grad;
      const auto params = net->parameters();
      for (std::size_t i = 0; i < params.size(); ++i) params[i].copy_(resume->parameters[i]);
    }
    acc::FusedSGD sgd(net->parameters(), optim::SGDOptions(0.05).momentum(0.9).weight_decay(0.01));
    if (resume != nullptr) load(sgd, resume->optimizer);
    for (int step = from; step < to; ++step) {
      const auto [x, y] = batch(step, torch::kDouble);
      sgd.zero_grad();
      net->loss(x, y).backward();
      sgd.step();
    }
    Snapshot snapshot;
    for (const auto& p : net->parameters()) snapshot.parameters.push_back(p.detach().clone());
    snapshot.optimizer = saved(sgd);
    return snapshot;
  };
  const Snapshot whole = run(0, kSteps, nullptr);
  const Snapshot half = run(0, kSteps / 2, nullptr);
  const Snapshot resumed = run(kSteps / 2, kSteps, &half);
  for (std::size_t i = 0; i < whole.parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed.parameters[i], whole.parameters[i])) << "parameter " << i;
  }
}

TEST(FusedAdam, AGradientSetToNoneSkipsItsParameterAsTorchDoes) {
  auto fused_net = make_net(torch::kFloat);
  auto torch_net = make_net(torch::kFloat);
  acc::FusedAdam fused(fused_net->parameters(), optim::AdamOptions(0.01).weight_decay(0.01));
  optim::Adam reference(torch_net->parameters(), optim::AdamOptions(0.01).weight_decay(0.01));
  for (int step = 0; step < 4; ++step) {
    const auto [x, y] = batch(step, torch::kFloat);
    fused.zero_grad(/*set_to_none=*/true);
    for (auto& p : torch_net->parameters()) p.mutable_grad() = torch::Tensor();
    fused_net->loss(x, y).backward();
    torch_net->loss(x, y).backward();
    if (step % 2 == 1) {  // the LayerNorm's and the cube's gradients dropped: those skip this step
      for (auto* net : {fused_net.get(), torch_net.get()}) {
        net->norm->weight.mutable_grad() = torch::Tensor();
        net->cube.mutable_grad() = torch::Tensor();
      }
    }
    fused.step();
    reference.step();
    expect_close(fused_net->parameters(), torch_net->parameters(), tolerance_for(torch::kFloat),
                 "after step " + std::to_string(step + 1));
  }
  // Step counts differ between parameters now, as in LibTorch.
  const auto* cube_state = state_of(fused, fused_net->cube);
  ASSERT_NE(cube_state, nullptr);
  EXPECT_EQ(dynamic_cast<const optim::AdamParamState&>(*cube_state).step(), 2);
  // The next step re-links the gradients into the flat buffer.
  const auto& flat = fused.flat_parameters().front().groups().front();
  EXPECT_EQ(fused_net->first->weight.grad().data_ptr(), range_start(flat, fused_net->first->weight, true));
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
