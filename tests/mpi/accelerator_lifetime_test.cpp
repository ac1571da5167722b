// The Accelerator's edges at 1, 2 and 4 ranks: one built on a State the
// program made (a sub-communicator, as coupled codes and MPMD jobs have),
// and what it prepared used after it is gone, which must be an Error.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "accelerate/error.hpp"
#include "accelerate/runtime/environment.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/training/accelerator.hpp"
#include "common/gpu_skip.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
using acc::testing::world_rank;
using acc::testing::world_size;

// Prepared models train on the State's device: one GPU per rank where there are GPUs.
class AcceleratorEdges : public ::testing::Test {
 protected:
  void SetUp() override {
    if (acc::testing::ranks_share_a_gpu()) GTEST_SKIP() << acc::testing::kRanksShareAGpu;
  }
};

class Numbers : public torch::data::datasets::Dataset<Numbers> {
 public:
  explicit Numbers(int64_t n) : n_(n) {}
  torch::data::Example<> get(size_t i) override {
    const auto value = static_cast<float>(i);
    return {torch::full({2}, value), torch::full({1}, value)};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(n_); }

 private:
  int64_t n_;
};

struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(2, 1)); }
  torch::Tensor forward(const torch::Tensor& x) { return fc->forward(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

// Even and odd world ranks, each half with a State of its own.
struct HalfCommunicator {
  HalfCommunicator() { MPI_Comm_split(MPI_COMM_WORLD, world_rank() % 2, world_rank(), &comm); }
  ~HalfCommunicator() { MPI_Comm_free(&comm); }
  HalfCommunicator(const HalfCommunicator&) = delete;
  HalfCommunicator& operator=(const HalfCommunicator&) = delete;
  [[nodiscard]] int size() const { return (world_size() + 1 - world_rank() % 2) / 2; }
  MPI_Comm comm = MPI_COMM_NULL;
};

TEST_F(AcceleratorEdges, RunsOnAStateOfASubCommunicator) {
  const HalfCommunicator half;
  auto state = std::make_shared<acc::State>(acc::StateOptions{.comm = half.comm});
  {
    acc::Accelerator accelerator(state);
    EXPECT_EQ(&accelerator.state(), state.get());
    EXPECT_EQ(accelerator.num_processes(), half.size());
    EXPECT_EQ(accelerator.process_index(), world_rank() / 2);
    // Collectives span the half only: the sum of world ranks of one parity.
    const auto summed =
        accelerator.reduce(torch::full({1}, static_cast<double>(world_rank()), torch::kFloat64), "sum");
    double expected = 0;
    for (int r = world_rank() % 2; r < world_size(); r += 2) expected += r;
    EXPECT_EQ(summed.item<double>(), expected);

    // A prepared step: the gradients are averaged within the half.
    Net net;
    torch::optim::SGD sgd(net->parameters(), 0.1);
    auto [model, optimizer] = accelerator.prepare(net, sgd);
    const auto x = torch::full({1, 2}, static_cast<float>(world_rank() + 1)).to(accelerator.device());
    accelerator.backward(model->forward<NetImpl>(x).sum());
    double mean_input = 0;
    for (int r = world_rank() % 2; r < world_size(); r += 2) mean_input += r + 1;
    mean_input /= half.size();
    EXPECT_NEAR(net->fc->weight.grad().cpu()[0][0].item<double>(), mean_input, 1e-5);
  }
  // The program keeps its State (and MPI) after the Accelerator is gone.
  EXPECT_NO_THROW(state->wait_for_everyone());
  EXPECT_EQ(state->num_processes(), half.size());
}

TEST_F(AcceleratorEdges, PrintFormatsOnTheMainProcessOnly) {
  acc::Accelerator accelerator;
  ::testing::internal::CaptureStdout();
  accelerator.print("{} of {} ready, loss {:.2f}", 3, 4, 0.5);
  accelerator.print("braces {} stay text without arguments");
  const std::string out = ::testing::internal::GetCapturedStdout();
  if (accelerator.is_main_process()) {
    EXPECT_EQ(out, "3 of 4 ready, loss 0.50\nbraces {} stay text without arguments\n");
  } else {
    EXPECT_EQ(out, "");
  }
}

TEST_F(AcceleratorEdges, TheStatesSettingsWinAndContraryOptionsAreErrors) {
  auto state = std::make_shared<acc::State>(acc::StateOptions{.timeout = std::chrono::seconds(77)});
  {
    // The environment would say otherwise; the State already decided.
    auto patch = acc::patch_environment({{"ACCELERATE_TIMEOUT", "99"}});
    acc::Accelerator accelerator(state);
    EXPECT_EQ(accelerator.settings().timeout, std::chrono::seconds(77));
    EXPECT_EQ(accelerator.settings().cpu, state->use_cpu());
    EXPECT_EQ(accelerator.process_group().timeout(), std::chrono::seconds(77));
  }
  acc::AcceleratorOptions contrary;
  contrary.init_kwargs.timeout = std::chrono::seconds(30);
  const std::string error = acc::testing::error_of([&] { acc::Accelerator accelerator(state, contrary); });
  EXPECT_NE(error.find("InitProcessGroupKwargs::timeout is 30 s"), std::string::npos) << error;
  EXPECT_NE(error.find("77 s"), std::string::npos) << error;
  EXPECT_NE(error.find("StateOptions::timeout"), std::string::npos) << error;

  const std::string null_state = acc::testing::error_of([] { acc::Accelerator accelerator(nullptr); });
  EXPECT_NE(null_state.find("State pointer is null"), std::string::npos) << null_state;
}

// The message every use after the Accelerator is gone must carry.
void expect_destroyed_error(const std::string& message, const std::string& call) {
  EXPECT_NE(message.find(call), std::string::npos) << message;
  EXPECT_NE(message.find("has been destroyed"), std::string::npos) << message;
}

TEST_F(AcceleratorEdges, PreparedObjectsOutlivingTheAcceleratorFailWithAnError) {
  Net net;
  torch::optim::SGD sgd(net->parameters(), 0.1);
  torch::optim::StepLR schedule(sgd, 1, 0.5);
  std::shared_ptr<acc::DistributedModel> model;
  std::shared_ptr<acc::AcceleratedOptimizer> optimizer;
  std::shared_ptr<acc::AcceleratedScheduler> scheduler;
  std::shared_ptr<acc::DataLoader> loader;
  std::shared_ptr<acc::DataLoader> mid_pass;
  std::optional<acc::DataLoader::iterator> position;
  at::Tensor loss;
  torch::Device device(torch::kCPU);
  {
    acc::Accelerator accelerator;
    device = accelerator.device();
    std::tie(model, optimizer, scheduler, loader, mid_pass) = accelerator.prepare(
        net, sgd, schedule, acc::data_loader(Numbers(8 * world_size()), {.batch_size = 2}),
        acc::data_loader(Numbers(8 * world_size()), {.batch_size = 2}));
    // While it lives, everything works.
    for (const auto& batch : *loader) {
      optimizer->zero_grad();
      accelerator.backward(model->forward<NetImpl>(batch.data.to(device)).sum());
      optimizer->step();
      scheduler->step();
    }
    position = mid_pass->begin();
    loss = model->forward<NetImpl>(torch::ones({1, 2}).to(device)).sum();
  }
  using acc::testing::error_of;
  expect_destroyed_error(error_of<acc::Error>([&] { model->forward<NetImpl>(torch::ones({1, 2}).to(device)); }),
                         "DistributedModel::forward");
  expect_destroyed_error(error_of<acc::Error>([&] { loss.backward(); }), "DistributedModel");
  expect_destroyed_error(error_of<acc::Error>([&] { optimizer->step(); }), "AcceleratedOptimizer::step");
  expect_destroyed_error(error_of<acc::Error>([&] { optimizer->zero_grad(); }), "AcceleratedOptimizer::zero_grad");
  expect_destroyed_error(error_of<acc::Error>([&] { scheduler->step(); }), "AcceleratedScheduler::step");
  expect_destroyed_error(error_of<acc::Error>([&] { loader->begin(); }), "DataLoader::begin");
  expect_destroyed_error(error_of<acc::Error>([&] { ++*position; }), "DataLoader (next batch)");
  // The user's own objects stay usable, and the prepared ones can be dropped.
  EXPECT_NO_THROW(net->forward(torch::ones({1, 2}).to(device)));
  EXPECT_NO_THROW(sgd.step());
  position.reset();
  mid_pass.reset();
  loader.reset();
  scheduler.reset();
  optimizer.reset();
  model.reset();
}

TEST_F(AcceleratorEdges, ModelsOfAStandaloneGroupFailOnceTheGroupIsGone) {
  const acc::State state;
  Net net;
  net->to(accelerate::torch_device(state.device()));
  auto group = acc::ProcessGroup::world(state);
  acc::DistributedModel model(net.ptr(), *group);
  group.reset();
  const std::string message = acc::testing::error_of<acc::Error>(
      [&] { model.forward<NetImpl>(torch::ones({1, 2}).to(accelerate::torch_device(state.device()))); });
  expect_destroyed_error(message, "DistributedModel::forward");
  EXPECT_NE(message.find("the ProcessGroup"), std::string::npos) << message;
}

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
