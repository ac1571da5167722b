// The Accelerator at 1, 2 and 4 ranks: a prepared loop trains exactly like
// one process on the global batch; accumulation, schedulers, mixed precision,
// metrics and the agreement utilities.
#include "accelerate/training/accelerator.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <new>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "accelerate/amp/grad_scaler.hpp"
#include "accelerate/runtime/availability.hpp"
#include "accelerate/error.hpp"
#include "accelerate/random/seed.hpp"
#include "accelerate/runtime/environment.hpp"
#include "accelerate/runtime/state.hpp"
#include "common/gpu_skip.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
using acc::testing::world_rank;
using acc::testing::world_size;

// The suite's fixture: with a GPU visible these tests train on it, which
// needs a GPU per rank (common/gpu_skip.hpp).
class Accelerator : public ::testing::Test {
 protected:
  void SetUp() override {
    if (acc::testing::ranks_share_a_gpu()) GTEST_SKIP() << acc::testing::kRanksShareAGpu;
  }
};

constexpr int64_t kFeatures = 6;

// Sample i: a fixed pseudo-random input and a target (identical on every rank).
class RegressionDataset : public torch::data::datasets::Dataset<RegressionDataset> {
 public:
  explicit RegressionDataset(int64_t n) : n_(n) {
    torch::manual_seed(1234);
    inputs_ = torch::randn({n, kFeatures});
    targets_ = inputs_.sum(1, true).sin();
  }
  torch::data::Example<> get(size_t i) override { return {inputs_[i], targets_[i]}; }
  torch::optional<size_t> size() const override { return static_cast<size_t>(n_); }
  const torch::Tensor& inputs() const { return inputs_; }
  const torch::Tensor& targets() const { return targets_; }

 private:
  int64_t n_;
  torch::Tensor inputs_, targets_;
};

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(kFeatures, 8));
    fc2 = register_module("fc2", torch::nn::Linear(8, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::tanh(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Net);

Net make_net() {
  torch::manual_seed(7);
  return Net();
}

std::vector<torch::Tensor> snapshot(torch::nn::Module& module) {
  std::vector<torch::Tensor> copy;
  for (const auto& p : module.parameters()) copy.push_back(p.detach().clone());
  return copy;
}

void expect_close(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, double tol = 1e-5) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    // A prepared model lives on the State's device (a GPU where there is one).
    const auto x = a[i].cpu();
    const auto y = b[i].cpu();
    EXPECT_TRUE(torch::allclose(x, y, tol, tol))
        << "parameter " << i << " differs by " << (x - y).abs().max().item<double>();
  }
}

// One process, SGD over consecutive global batches of `global_batch` samples.
std::vector<torch::Tensor> reference_training(const RegressionDataset& data, int64_t global_batch, int64_t steps,
                                              double lr) {
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), lr);
  for (int64_t s = 0; s < steps; ++s) {
    auto x = data.inputs().narrow(0, s * global_batch, global_batch);
    auto y = data.targets().narrow(0, s * global_batch, global_batch);
    sgd.zero_grad();
    torch::mse_loss(net->forward(x), y).backward();
    sgd.step();
  }
  return snapshot(*net);
}

TEST_F(Accelerator, PreparedLoopMatchesOneProcessOnTheGlobalBatch) {
  const int64_t per_rank = 4;
  const int64_t steps = 5;
  RegressionDataset data(per_rank * world_size() * steps);
  acc::Accelerator accelerator;
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto [model, optimizer, loader] = accelerator.prepare(net, sgd, acc::data_loader(data, {.batch_size = per_rank}));
  int64_t seen = 0;
  for (const auto& batch : *loader) {
    optimizer->zero_grad();
    auto loss = torch::mse_loss(model->forward<NetImpl>(batch.data), batch.target);
    accelerator.backward(loss);
    optimizer->step();
    ++seen;
  }
  EXPECT_EQ(seen, steps);
  EXPECT_EQ(accelerator.step(), steps);
  expect_close(snapshot(*net), reference_training(data, per_rank * world_size(), steps, 0.1));
  EXPECT_EQ(acc::Accelerator::unwrap_model(*model).get(), net.ptr().get());
}

TEST_F(Accelerator, AccumulationOfKMicroBatchesEqualsOneStepOfKTimesTheBatch) {
  const int64_t micro = 2;
  const int k = 3;
  const int64_t steps = 2;
  RegressionDataset data(micro * k * world_size() * steps);
  acc::Accelerator accelerator({.gradient_accumulation_steps = k});
  EXPECT_EQ(accelerator.gradient_accumulation_steps(), k);
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), 0.05);
  // split_batches=false, shuffle off: global step s covers micro rounds s*k … s*k+k-1,
  // which are the samples [s*k*P*micro, (s+1)*k*P*micro) in some order: the same set.
  auto [model, optimizer, loader] = accelerator.prepare(net, sgd, acc::data_loader(data, {.batch_size = micro}));
  std::vector<bool> syncs;
  for (const auto& batch : *loader) {
    auto scope = accelerator.accumulate(*model);
    syncs.push_back(accelerator.sync_gradients());
    auto loss = torch::mse_loss(model->forward<NetImpl>(batch.data), batch.target);
    accelerator.backward(loss);
    optimizer->step();
    optimizer->zero_grad();
  }
  EXPECT_EQ(syncs, (std::vector<bool>{false, false, true, false, false, true}));
  EXPECT_EQ(accelerator.step(), steps);
  const auto counters = model->counters();
  EXPECT_EQ(counters.sync_steps, steps);
  EXPECT_EQ(counters.local_steps, steps * (k - 1));  // no all-reduce on those
  expect_close(snapshot(*net), reference_training(data, micro * k * world_size(), steps, 0.05));
}

TEST_F(Accelerator, NoAllReduceOnNonSynchronisingMicroSteps) {
  RegressionDataset data(8 * world_size());
  acc::Accelerator accelerator({.gradient_accumulation_steps = 4});
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), 0.05);
  auto [model, optimizer, loader] = accelerator.prepare(net, sgd, acc::data_loader(data, {.batch_size = 1}));
  int64_t step = 0;
  for (const auto& batch : *loader) {
    const auto before = model->counters().all_reduces;
    {
      auto scope = accelerator.accumulate(*model);
      accelerator.backward(torch::mse_loss(model->forward<NetImpl>(batch.data), batch.target));
      optimizer->step();
      optimizer->zero_grad();
    }
    const auto after = model->counters().all_reduces;
    ++step;
    if (step % 4 != 0) {
      EXPECT_EQ(after, before) << "micro-step " << step << " communicated";
    } else {
      EXPECT_GT(after, before) << "step " << step << " did not communicate";
    }
  }
  EXPECT_EQ(step, 8);
}

TEST_F(Accelerator, SyncsAtTheEndOfTheLoaderWhenThePassIsNotAMultipleOfK) {
  RegressionDataset data(5 * world_size());
  acc::Accelerator accelerator({.gradient_accumulation_steps = 2});
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), 0.05);
  auto [model, optimizer, loader] = accelerator.prepare(net, sgd, acc::data_loader(data, {.batch_size = 1}));
  std::vector<bool> syncs;
  for (const auto& batch : *loader) {
    auto scope = accelerator.accumulate(*model);
    syncs.push_back(accelerator.sync_gradients());
    accelerator.backward(torch::mse_loss(model->forward<NetImpl>(batch.data), batch.target));
    optimizer->step();
    optimizer->zero_grad();
  }
  EXPECT_EQ(syncs, (std::vector<bool>{false, true, false, true, true}));
  EXPECT_EQ(accelerator.step(), 3);
}

TEST_F(Accelerator, SchedulerStepsOnlyOnRealOptimizerSteps) {
  RegressionDataset data(8 * world_size());
  acc::Accelerator accelerator({.gradient_accumulation_steps = 2});
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), 1.0);
  torch::optim::StepLR step_lr(sgd, /*step_size=*/1, /*gamma=*/0.5);
  auto [model, optimizer, scheduler, loader] =
      accelerator.prepare(net, sgd, step_lr, acc::data_loader(data, {.batch_size = 1}));
  for (const auto& batch : *loader) {
    auto scope = accelerator.accumulate(*model);
    accelerator.backward(torch::mse_loss(model->forward<NetImpl>(batch.data), batch.target));
    optimizer->step();
    scheduler->step();
    optimizer->zero_grad();
  }
  EXPECT_EQ(scheduler->step_count(), 4);  // 8 micro-steps, 4 optimizer steps, one schedule step each
  // LibTorch's StepLR leaves the rate alone on its first step: 3 decays.
  EXPECT_DOUBLE_EQ(sgd.param_groups()[0].options().get_lr(), 1.0 / 8);
}

TEST_F(Accelerator, SchedulerCanStepOncePerProcessAsAccelerateDoes) {
  RegressionDataset data(2 * world_size());
  acc::Accelerator accelerator({.step_scheduler_per_process = true});
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), 1.0);
  torch::optim::StepLR step_lr(sgd, 1, 0.5);
  auto [model, optimizer, scheduler, loader] =
      accelerator.prepare(net, sgd, step_lr, acc::data_loader(data, {.batch_size = 1}));
  for (const auto& batch : *loader) {
    accelerator.backward(torch::mse_loss(model->forward<NetImpl>(batch.data), batch.target));
    optimizer->step();
    scheduler->step();
    optimizer->zero_grad();
  }
  EXPECT_EQ(scheduler->step_count(), 2 * world_size());
}

TEST_F(Accelerator, ScaledStepWithAnInfIsSkippedAndBacksOffTheScale) {
  // The fp16 path of AcceleratedOptimizer/Scheduler, driven on CPU fp32
  // gradients (fp16 autocast itself needs CUDA).
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), 0.1);
  torch::optim::StepLR step_lr(sgd, 1, 0.5);
  acc::GradientState gradient_state;
  acc::GradScaler scaler({.init_scale = 1024.0});
  acc::AcceleratedOptimizer optimizer(sgd, gradient_state, &scaler);
  acc::AcceleratedScheduler scheduler(step_lr, gradient_state, {&optimizer});
  const auto x = torch::randn({4, kFeatures});
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    scaler.scale(net->forward(x).sum()).backward();
    if (step == 1) net->fc1->weight.grad()[0][0] = std::numeric_limits<float>::infinity();
    const auto before = snapshot(*net);
    optimizer.step();
    scheduler.step();
    if (step == 1) {
      EXPECT_TRUE(optimizer.step_was_skipped());
      expect_close(snapshot(*net), before, 0.0);
      EXPECT_DOUBLE_EQ(scaler.get_scale(), 512.0);
      EXPECT_EQ(scheduler.step_count(), 1);  // not stepped with a skipped optimizer step
    } else {
      EXPECT_FALSE(optimizer.step_was_skipped());
      EXPECT_FALSE(torch::equal(snapshot(*net)[0], before[0]));
    }
  }
  EXPECT_EQ(scheduler.step_count(), 2);
}

TEST_F(Accelerator, Bf16AutocastRunsOnTheCpu) {
  acc::Accelerator accelerator({.cpu = true, .mixed_precision = "bf16"});
  EXPECT_EQ(accelerator.mixed_precision(), acc::MixedPrecision::BF16);
  Net net = make_net();
  auto model = accelerator.prepare(net);
  const auto out = model->forward<NetImpl>(torch::randn({3, kFeatures}));
  EXPECT_EQ(out.scalar_type(), torch::kFloat);  // computed in bf16, returned in fp32 (convert_outputs_to_fp32)
  {
    auto autocast = accelerator.autocast();
    EXPECT_EQ(torch::mm(torch::randn({2, 2}), torch::randn({2, 2})).scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(torch::mm(torch::randn({2, 2}), torch::randn({2, 2})).scalar_type(), torch::kFloat);
  EXPECT_EQ(net->fc1->weight.scalar_type(), torch::kFloat);  // fp32 master weights
}

TEST_F(Accelerator, Fp16OnTheCpuIsRefusedWithAReason) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible: fp16 is valid here";
  if (acc::is_cpu_fp16_autocast_available()) {
    GTEST_SKIP() << "LibTorch " << acc::torch_version() << " autocasts float16 on the CPU (accelerator_fp16_test)";
  }
  const auto message =
      acc::testing::error_of<acc::ConfigError>([] { acc::Accelerator a({.mixed_precision = "fp16"}); });
  EXPECT_NE(message.find("bf16"), std::string::npos) << message;
}

TEST_F(Accelerator, AccumulationStepsAndPluginTogetherAreAnError) {
  const auto message = acc::testing::error_of<acc::ConfigError>([] {
    acc::Accelerator a(
        {.gradient_accumulation_steps = 2, .gradient_accumulation_plugin = acc::GradientAccumulationPlugin{}});
  });
  EXPECT_NE(message.find("only one"), std::string::npos) << message;
}

struct BranchNet : torch::nn::Module {
  BranchNet() {
    trunk = register_module("trunk", torch::nn::Linear(kFeatures, 4));
    side = register_module("side", torch::nn::Linear(4, 1));
    head = register_module("head", torch::nn::Linear(4, 1));
  }
  torch::Tensor forward(const torch::Tensor& x, bool use_side) {
    auto h = torch::relu(trunk->forward(x));
    return use_side ? side->forward(h) : head->forward(h);
  }
  torch::nn::Linear trunk{nullptr}, side{nullptr}, head{nullptr};
};

TEST_F(Accelerator, FindUnusedParametersWithASkippedBranch) {
  acc::Accelerator accelerator({.ddp_kwargs = {.find_unused_parameters = true}});
  torch::manual_seed(3);
  auto net = std::make_shared<BranchNet>();
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  const auto x = (torch::ones({2, kFeatures}) * (world_rank() + 1)).to(torch::Device(accelerator.device()));
  // Rank 0 uses the side branch, the others the head: each rank's unused
  // branch contributes zeros, and every rank ends with the same average.
  accelerator.backward(model->forward<BranchNet>(x, world_rank() == 0).sum());
  optimizer->step();
  auto grad = net->side->weight.grad().clone();
  auto all = accelerator.gather(grad.unsqueeze(0));
  for (int r = 0; r < world_size(); ++r) EXPECT_TRUE(torch::equal(all[r], all[0]));
  EXPECT_GT(grad.abs().sum().item<double>(), 0.0);
}

// Each sample carries its index as data.
class IndexDataset : public torch::data::datasets::Dataset<IndexDataset> {
 public:
  explicit IndexDataset(int64_t n) : n_(n) {}
  torch::data::Example<> get(size_t i) override {
    return {torch::full({1}, static_cast<double>(i)), torch::zeros({1})};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(n_); }

 private:
  int64_t n_;
};

TEST_F(Accelerator, GatherForMetricsOverAnUnevenDatasetSeesEverySampleOnce) {
  for (int64_t n : {10, 11, 7, 16}) {
    acc::Accelerator accelerator;
    auto loader = accelerator.prepare(acc::data_loader(IndexDataset(n), {.batch_size = 2}));
    std::vector<int64_t> seen;
    std::vector<int64_t> seen_objects;
    for (const auto& batch : *loader) {
      const at::Tensor all = accelerator.gather_for_metrics(batch.data);
      for (int64_t i = 0; i < all.size(0); ++i) seen.push_back(all[i].item<int64_t>());
      std::vector<int64_t> mine;
      for (int64_t i = 0; i < batch.data.size(0); ++i) mine.push_back(batch.data[i].item<int64_t>());
      for (const auto& v : accelerator.gather_for_metrics(mine, /*use_gather_object=*/true)) seen_objects.push_back(v);
    }
    std::sort(seen.begin(), seen.end());
    std::sort(seen_objects.begin(), seen_objects.end());
    std::vector<int64_t> expected(n);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(seen, expected) << "n = " << n;
    EXPECT_EQ(seen_objects, expected) << "n = " << n << " (gather_object)";
  }
}

TEST_F(Accelerator, TriggerRaisedOnOneRankIsSeenByAll) {
  acc::Accelerator accelerator;
  EXPECT_FALSE(accelerator.check_trigger());
  if (world_rank() == world_size() - 1) accelerator.set_trigger();
  EXPECT_TRUE(accelerator.check_trigger());
  EXPECT_FALSE(accelerator.check_trigger());  // reset after being seen
}

TEST_F(Accelerator, FindExecutableBatchSizeAgreesAcrossRanks) {
  acc::Accelerator accelerator;
  std::vector<int64_t> tried;
  const int64_t chosen = accelerator.find_executable_batch_size(128, [&](int64_t batch_size) {
    tried.push_back(batch_size);
    // Only the last rank runs out of memory above 16.
    if (world_rank() == world_size() - 1 && batch_size > 16) throw std::bad_alloc();
    return batch_size;
  });
  EXPECT_EQ(chosen, 16);
  EXPECT_EQ(tried, (std::vector<int64_t>{128, 64, 32, 16}));
  const auto message = acc::testing::error_of<acc::ConfigError>([&] {
    accelerator.find_executable_batch_size(4, [](int64_t) -> int { throw std::runtime_error("CUDA out of memory."); });
  });
  EXPECT_NE(message.find("down to 1"), std::string::npos) << message;
}

// Every key of the configuration file reaches the run: the State's settings
// that only the environment and the file give (log_level, mpi_thread_level,
// emulated_ranks_per_node) and the timeout, unless the environment says otherwise.
TEST_F(Accelerator, TheConfigurationFileIsHonouredForEverySetting) {
  const auto dir = acc::testing::shared_temp_directory("accelerator_config");
  const auto path = dir / "config.yaml";
  if (world_rank() == 0) {
    std::ofstream(path) << "log_level: error\nmpi_thread_level: single\nemulated_ranks_per_node: 1\n"
                           "timeout: 77\ndebug: true\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  {
    acc::Accelerator accelerator({.config_file = path});
    EXPECT_EQ(accelerator.state().log_level(), acc::LogLevel::Error);
    EXPECT_EQ(accelerator.state().thread_level_required(), acc::ThreadLevel::Single);
    EXPECT_EQ(accelerator.state().emulated_ranks_per_node(), 1);
    EXPECT_EQ(accelerator.state().num_nodes(), world_size());
    EXPECT_EQ(accelerator.state().timeout(), std::chrono::seconds(77));
    EXPECT_TRUE(accelerator.process_group().debug_mode());
  }
  {
    auto patch = acc::patch_environment({{"ACCELERATE_TIMEOUT", "33"}, {"ACCELERATE_LOG_LEVEL", "warning"}});
    acc::Accelerator accelerator({.config_file = path});
    EXPECT_EQ(accelerator.state().timeout(), std::chrono::seconds(33));  // the environment beats the file
    EXPECT_EQ(accelerator.state().log_level(), acc::LogLevel::Warning);
    acc::Accelerator explicit_timeout({.init_kwargs = {.timeout = std::chrono::seconds(1800)}, .config_file = path});
    EXPECT_EQ(explicit_timeout.state().timeout(), std::chrono::seconds(1800));  // explicit beats both
  }
  acc::testing::remove_shared_directory(dir);
}

// --- the API a converted Accelerate script uses (seeds' names and semantics) ---

// forward(x, scale) and a tuple result: the prepared model is called with any signature.
struct TwoInputNetImpl : torch::nn::Module {
  TwoInputNetImpl() { fc = register_module("fc", torch::nn::Linear(kFeatures, 2)); }
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, double scale) {
    const auto y = fc->forward(x);
    return {y * scale, y.sum(1)};
  }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(TwoInputNet);

TEST_F(Accelerator, APreparedModelIsCalledLikeItsModule) {
  acc::Accelerator accelerator;
  Net net = make_net();
  auto model = accelerator.prepare(net);
  const auto x = torch::randn({3, kFeatures}).to(accelerator.device());
  EXPECT_TRUE(torch::equal(model(x), net->forward(x)));
  EXPECT_EQ(model.module().get(), net.ptr().get());
  const std::shared_ptr<acc::DistributedModel> untyped = model;  // still a DistributedModel
  EXPECT_EQ(untyped.get(), model.get());

  torch::manual_seed(3);
  auto two = std::make_shared<TwoInputNetImpl>();
  auto prepared = accelerator.prepare(two);
  const auto [scaled, summed] = prepared(x, 2.0);
  const auto [plain, plain_sum] = two->forward(x, 1.0);
  EXPECT_TRUE(torch::allclose(scaled, plain * 2.0));
  EXPECT_TRUE(torch::allclose(summed, plain_sum));
  const acc::PreparedModel<NetImpl> empty;
  EXPECT_THROW(empty(x), acc::ConfigError);
}

// Accelerate's prepare converts the outputs of an autocast forward to fp32,
// so the loss is computed in fp32; nested results too.
TEST_F(Accelerator, MixedPrecisionOutputsComeBackAsFp32) {
  acc::Accelerator accelerator({.cpu = true, .mixed_precision = "bf16"});
  torch::manual_seed(3);
  auto two = std::make_shared<TwoInputNetImpl>();
  auto model = accelerator.prepare(two);
  const auto [scaled, summed] = model(torch::randn({3, kFeatures}), 1.0);
  EXPECT_EQ(scaled.scalar_type(), torch::kFloat);
  EXPECT_EQ(summed.scalar_type(), torch::kFloat);
  // The conversion is what changed the dtype: without it, autocast's bf16 shows.
  acc::DistributedModel raw(std::make_shared<TwoInputNetImpl>(), accelerator.process_group(), {},
                            {.autocast_dtype = torch::kBFloat16, .convert_outputs_to_fp32 = false});
  EXPECT_EQ(std::get<0>(raw.forward<TwoInputNetImpl>(torch::randn({3, kFeatures}), 1.0)).scalar_type(),
            torch::kBFloat16);
}

// Seeds: Accelerator.print prints once per server (the local main process).
TEST_F(Accelerator, PrintIsOncePerNode) {
  // Virtual nodes of two ranks: at 4 ranks, ranks 0 and 2 are local main processes.
  auto state = std::make_shared<acc::State>(acc::StateOptions{.cpu = true, .emulated_ranks_per_node = 2});
  acc::Accelerator accelerator(state);
  ::testing::internal::CaptureStdout();
  accelerator.print("epoch {} loss {:.2f}", 3, 0.25);
  accelerator.print("plain");
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(out, world_rank() % 2 == 0 ? "epoch 3 loss 0.25\nplain\n" : "") << "rank " << world_rank();
}

// Seeds: Accelerator.reduce defaults to "sum"; "mean" divides by the process
// count; "none" leaves the input; scale multiplies the result.
TEST_F(Accelerator, ReduceFollowsTheSeeds) {
  acc::Accelerator accelerator;
  const auto mine = torch::full({2}, static_cast<double>(world_rank() + 1), torch::kDouble);
  const double sum = world_size() * (world_size() + 1) / 2.0;
  EXPECT_TRUE(torch::equal(accelerator.reduce(mine), torch::full({2}, sum, torch::kDouble)));
  EXPECT_TRUE(torch::allclose(accelerator.reduce(mine, "mean"), torch::full({2}, sum / world_size(), torch::kDouble)));
  EXPECT_TRUE(torch::equal(accelerator.reduce(mine, "none"), mine));
  EXPECT_TRUE(torch::equal(accelerator.reduce(mine, "sum", 0.5), torch::full({2}, sum * 0.5, torch::kDouble)));
}

// Seeds: skip_first_batches resumes mid-epoch; only that pass is shortened.
TEST_F(Accelerator, SkipFirstBatchesShortensOnlyTheNextPass) {
  const int64_t steps = 5;
  acc::Accelerator accelerator;
  auto loader = accelerator.prepare(acc::data_loader(IndexDataset(2 * world_size() * steps), {.batch_size = 2}));
  std::vector<torch::Tensor> whole;
  for (const auto& batch : *loader) whole.push_back(batch.data.clone());
  ASSERT_EQ(static_cast<int64_t>(whole.size()), steps);
  std::vector<torch::Tensor> resumed;
  for (const auto& batch : *accelerator.skip_first_batches(loader, 2)) resumed.push_back(batch.data.clone());
  ASSERT_EQ(resumed.size(), 3U);
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_TRUE(torch::equal(resumed[i], whole[i + 2])) << "batch " << i;
  EXPECT_EQ(loader->epoch(), 1);  // the skip applied to the epoch after the complete one
  int64_t next = 0;
  for ([[maybe_unused]] const auto& batch : *loader) ++next;
  EXPECT_EQ(next, steps);
  int64_t none = 0;
  for ([[maybe_unused]] const auto& batch : *accelerator.skip_first_batches(loader, steps + 3)) ++none;
  EXPECT_EQ(none, 0);
  EXPECT_THROW(accelerator.skip_first_batches(loader, -1), acc::ConfigError);
}

// set_seed with named options; device_specific adds the rank (the accelerator supplies the State).
TEST_F(Accelerator, SetSeedTakesNamedOptions) {
  acc::Accelerator accelerator;
  accelerator.set_seed(42, {.device_specific = true});
  const auto drawn = torch::randn({4});
  torch::manual_seed(42 + world_rank());
  EXPECT_TRUE(torch::equal(drawn, torch::randn({4})));
  acc::set_seed(42, {.device_specific = false});
  const auto same = torch::randn({4});
  torch::manual_seed(42);
  EXPECT_TRUE(torch::equal(same, torch::randn({4})));
  EXPECT_THROW(acc::set_seed(42, {.device_specific = true}), acc::ConfigError);  // no State to take the rank from
}

// --- every training-step call through the Accelerator ---

double total_norm(torch::nn::Module& module) {
  double sum = 0;
  for (const auto& p : module.parameters()) sum += p.grad().pow(2).sum().item<double>();
  return std::sqrt(sum);
}

// Whether every rank holds rank 0's gradients.
bool gradients_agree(acc::Accelerator& accelerator, torch::nn::Module& module) {
  for (const auto& p : module.parameters()) {
    const auto all = accelerator.gather(p.grad().detach().unsqueeze(0));
    for (int64_t r = 1; r < all.size(0); ++r) {
      if (!torch::equal(all[r], all[0])) return false;
    }
  }
  return true;
}

TEST_F(Accelerator, ClipGradNormClipsTheAveragedGradientOnSynchronisingStepsOnly) {
  RegressionDataset data(4 * world_size() * 2);
  acc::Accelerator accelerator({.gradient_accumulation_steps = 2});
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto [model, optimizer, loader] = accelerator.prepare(net, sgd, acc::data_loader(data, {.batch_size = 4}));
  const double max_norm = 1e-3;
  int micro_step = 0;
  for (const auto& batch : *loader) {
    auto scope = accelerator.accumulate(*model);
    accelerator.backward(torch::mse_loss(model(batch.data), batch.target));
    const double before = total_norm(*net);
    const auto norm = accelerator.clip_grad_norm_(net->parameters(), max_norm);
    if (micro_step++ == 0) {
      EXPECT_FALSE(norm.has_value()) << "clipped a partial accumulation";
      EXPECT_DOUBLE_EQ(total_norm(*net), before);
    } else {
      ASSERT_TRUE(norm.has_value());
      EXPECT_NEAR(*norm, before, 1e-6 * before) << "not the norm of the averaged gradients";
      EXPECT_NEAR(total_norm(*net), max_norm, 1e-6) << "the gradients were not scaled to max_norm";
      EXPECT_TRUE(gradients_agree(accelerator, *net));
    }
    optimizer->step();
    optimizer->zero_grad();
  }
  EXPECT_EQ(micro_step, 2);
}

TEST_F(Accelerator, ClipGradValueClampsEveryAveragedGradient) {
  RegressionDataset data(4 * world_size());
  acc::Accelerator accelerator;
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto [model, optimizer, loader] = accelerator.prepare(net, sgd, acc::data_loader(data, {.batch_size = 4}));
  for (const auto& batch : *loader) {
    accelerator.backward(torch::mse_loss(model(batch.data), batch.target));
    double largest = 0;
    for (const auto& p : net->parameters()) largest = std::max(largest, p.grad().abs().max().item<double>());
    const double clip = largest / 4;
    accelerator.clip_grad_value_(net->parameters(), clip);
    double after = 0;
    for (const auto& p : net->parameters()) after = std::max(after, p.grad().abs().max().item<double>());
    EXPECT_DOUBLE_EQ(after, clip);
    EXPECT_TRUE(gradients_agree(accelerator, *net));
  }
}

// sync_each_batch: gradients are all-reduced on every micro-step (less memory
// held locally), while sync_gradients and the optimizer steps keep the plugin's rhythm.
TEST_F(Accelerator, SyncEachBatchCommunicatesOnEveryMicroStep) {
  RegressionDataset data(4 * world_size() * 4);
  acc::Accelerator accelerator(
      {.gradient_accumulation_plugin = acc::GradientAccumulationPlugin{.num_steps = 2, .sync_each_batch = true}});
  Net net = make_net();
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto [model, optimizer, loader] = accelerator.prepare(net, sgd, acc::data_loader(data, {.batch_size = 4}));
  std::vector<bool> syncs;
  for (const auto& batch : *loader) {
    const auto before = model->counters().all_reduces;
    auto scope = accelerator.accumulate(*model);
    syncs.push_back(accelerator.sync_gradients());
    accelerator.backward(torch::mse_loss(model(batch.data), batch.target));
    EXPECT_GT(model->counters().all_reduces, before) << "micro-step " << syncs.size() << " did not communicate";
    EXPECT_TRUE(gradients_agree(accelerator, *net));
    optimizer->step();
    optimizer->zero_grad();
  }
  EXPECT_EQ(syncs, (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(accelerator.step(), 2);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
