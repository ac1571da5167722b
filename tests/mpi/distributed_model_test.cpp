// DistributedModel at 1, 2 and 4 ranks. Every rank also trains a
// single-process reference on the global batch (the data is generated from
// a fixed seed, identical on all ranks), so each rank checks its own result.
#include "accelerate/training/distributed_model.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/modeling/empty_weights.hpp"
#include "accelerate/modeling/module_tensors.hpp"
#include "accelerate/runtime/state.hpp"
#include "common/mapped_file.hpp"
#include "common/test_helpers.hpp"
#include "common/world_group.hpp"
#include "training/gradient_bucket_plan.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;

struct NetImpl : torch::nn::Module {
  NetImpl(int64_t hidden = 16) {
    fc1 = register_module("fc1", torch::nn::Linear(8, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, 16));
    fc3 = register_module("fc3", torch::nn::Linear(16, 4));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc3->forward(torch::tanh(fc2->forward(torch::tanh(fc1->forward(x)))));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};

// Two heads; `side` runs only when asked (a branch some ranks skip).
struct BranchNet : torch::nn::Module {
  BranchNet() {
    trunk = register_module("trunk", torch::nn::Linear(8, 8));
    side = register_module("side", torch::nn::Linear(8, 4));
    head = register_module("head", torch::nn::Linear(8, 4));
  }
  torch::Tensor forward(const torch::Tensor& x, bool use_side) {
    auto h = torch::relu(trunk->forward(x));
    auto y = head->forward(h);
    return use_side ? y + side->forward(h) : y;
  }
  torch::nn::Linear trunk{nullptr}, side{nullptr}, head{nullptr};
};

struct Empty : torch::nn::Module {};

class DistributedModelTest : public ::testing::Test {
 protected:
  acc::State state;
  std::unique_ptr<acc::ProcessGroup> group = acc::testing::world_group(state);
  const int rank = group->rank();
  const int size = group->size();

  // Fixed global data: rows [rank*b, (rank+1)*b) belong to this rank.
  static std::pair<torch::Tensor, torch::Tensor> global_data(int64_t rows, int64_t seed = 7) {
    torch::manual_seed(seed);
    return {torch::randn({rows, 8}), torch::randn({rows, 4})};
  }
  std::shared_ptr<NetImpl> make_net(int64_t seed) {
    torch::manual_seed(seed);
    return std::make_shared<NetImpl>();
  }
  static void expect_same_parameters(torch::nn::Module& a, torch::nn::Module& b, double atol, const std::string& what) {
    auto pa = a.named_parameters();
    auto pb = b.named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (const auto& item : pa) {
      const auto& other = pb[item.key()];
      const double diff = (item.value() - other).abs().max().item<double>();
      EXPECT_LE(diff, atol) << what << ": parameter " << item.key() << " differs by " << diff;
    }
  }
  // `steps` steps of the reference on the global batch beside the model on
  // this rank's `b` rows of it.
  void train_side_by_side(NetImpl& reference, torch::optim::Optimizer& reference_optimizer,
                          acc::DistributedModel& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x,
                          const torch::Tensor& y, int64_t b, int steps) const {
    for (int s = 0; s < steps; ++s) {
      reference_optimizer.zero_grad();
      torch::mse_loss(reference.forward(x), y).backward();
      reference_optimizer.step();
      optimizer.zero_grad();
      torch::mse_loss(model.forward<NetImpl>(x.narrow(0, rank * b, b)), y.narrow(0, rank * b, b)).backward();
      optimizer.step();
    }
  }
  // max |x_rank - x_0| over ranks of a flat copy of the parameters.
  double spread_of_parameters(torch::nn::Module& m) {
    std::vector<torch::Tensor> flat;
    for (auto& p : m.parameters()) flat.push_back(p.detach().reshape({-1}));
    auto mine = torch::cat(flat).unsqueeze(0).contiguous();
    auto all = group->all_gather(mine);
    return (all - all[0]).abs().max().item<double>();
  }
};

TEST_F(DistributedModelTest, TrainingMatchesSingleProcessOnGlobalBatch) {
  const int64_t b = 6;
  const int steps = 5;
  auto [x, y] = global_data(b * size);
  struct Variant {
    std::string name;
    acc::DistributedDataParallelKwargs kwargs;
    acc::DistributedModelOptions options;
  };
  std::vector<Variant> variants;
  variants.push_back({"default (bucket views)", {}, {}});
  variants.push_back({"copies, no bucket view", {.gradient_as_bucket_view = false}, {}});
  variants.push_back({"bucket per parameter", {.bucket_cap_mb = 0}, {}});
  variants.push_back({"explicit synchronize", {.bucket_cap_mb = 0.0005}, {.finalize_at_backward_end = false}});
  for (const auto& v : variants) {
    auto reference = make_net(3);
    torch::optim::SGD ref_opt(reference->parameters(), 0.1);
    for (int s = 0; s < steps; ++s) {
      ref_opt.zero_grad();
      torch::mse_loss(reference->forward(x), y).backward();
      ref_opt.step();
    }
    auto net = make_net(3);
    acc::DistributedModel model(net, *group, v.kwargs, v.options);
    torch::optim::SGD opt(net->parameters(), 0.1);
    auto xs = x.narrow(0, rank * b, b);
    auto ys = y.narrow(0, rank * b, b);
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad();
      torch::mse_loss(model.forward<NetImpl>(xs), ys).backward();
      if (!v.options.finalize_at_backward_end) model.synchronize_gradients();
      model.synchronize_gradients();  // idempotent: nothing pending any more
      opt.step();
    }
    expect_same_parameters(*net, *reference, 1e-5, v.name);
    const auto c = model.counters();
    const auto buckets = static_cast<int64_t>(model.bucket_assignment().size());
    EXPECT_EQ(c.sync_steps, steps) << v.name;
    EXPECT_EQ(c.all_reduces, steps * buckets) << v.name;
    for (const auto& bucket : c.buckets) {
      EXPECT_EQ(bucket.launches, steps) << v.name;
      // Every gradient arrives during backward: all buckets overlap it.
      EXPECT_EQ(bucket.launched_in_backward, steps) << v.name;
    }
  }
}

TEST_F(DistributedModelTest, BucketsOfTheNodeSegmentTrainAsOneProcess) {
  // Buckets above 64 KiB are reduced where they lie in the node's shared
  // memory: their gradients are views of it, and the result is unchanged.
  const int64_t b = 4;
  auto [x, y] = global_data(b * size);
  torch::manual_seed(5);
  auto reference = std::make_shared<NetImpl>(4096);
  torch::manual_seed(5);
  auto net = std::make_shared<NetImpl>(4096);
  torch::optim::SGD ref_opt(reference->parameters(), 0.05);
  acc::DistributedModel model(net, *group, {.bucket_cap_mb = 0.5});
  torch::optim::SGD opt(net->parameters(), 0.05);
  train_side_by_side(*reference, ref_opt, model, opt, x, y, b, 3);
  expect_same_parameters(*net, *reference, 1e-5, "buckets in the node segment");
  const bool shared = group->cpu_all_reduce_algorithm().starts_with("shared memory");
  EXPECT_EQ(shared, size > 1) << group->cpu_all_reduce_algorithm();
  for (const auto& parameter : net->parameters()) {
    const auto file = acc::testing::mapped_file_of(parameter.grad().data_ptr());
    EXPECT_EQ(file.find("/accelerate-hpc-") != std::string::npos, shared) << file;
  }
}

TEST_F(DistributedModelTest, ConstructionBroadcastsParametersAndBuffers) {
  torch::manual_seed(100 + rank);  // differently initialised ranks
  auto net = std::make_shared<NetImpl>();
  auto stat = net->register_buffer("stat", torch::full({3}, static_cast<float>(rank + 1)));
  if (size > 1) EXPECT_GT(spread_of_parameters(*net), 0.0);
  acc::DistributedModel model(net, *group);
  EXPECT_EQ(spread_of_parameters(*net), 0.0);
  EXPECT_TRUE(torch::equal(net->named_buffers()["stat"], torch::full({3}, 1.0f)));

  // broadcast_buffers: each forward restores rank 0's buffers.
  net->named_buffers()["stat"].fill_(static_cast<float>(rank + 5));
  model.prepare_forward();
  EXPECT_TRUE(torch::equal(net->named_buffers()["stat"], torch::full({3}, 5.0f)));
  EXPECT_EQ(model.counters().buffer_broadcasts, size > 1 ? 1 : 0);

  acc::DistributedModel quiet(net, *group, {.broadcast_buffers = false, .find_unused_parameters = true});
  net->named_buffers()["stat"].fill_(static_cast<float>(rank + 5));
  quiet.prepare_forward();
  EXPECT_TRUE(torch::equal(net->named_buffers()["stat"], torch::full({3}, static_cast<float>(rank + 5))));
  // Armed by the forward though no backward ran: every rank reduces zeros,
  // and parameters unused everywhere keep an undefined .grad.
  quiet.synchronize_gradients();
  EXPECT_EQ(quiet.counters().sync_steps, 1);
  for (auto& p : net->parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST_F(DistributedModelTest, NoSyncAccumulationEqualsOneLargeStep) {
  const int64_t b = 4;
  const int k = 3;
  auto [x, y] = global_data(b * k * size, 11);
  for (bool view : {false, true}) {
    auto reference = make_net(5);
    torch::optim::SGD ref_opt(reference->parameters(), 0.05);
    ref_opt.zero_grad();
    torch::mse_loss(reference->forward(x), y).backward();
    ref_opt.step();

    auto net = make_net(5);
    acc::DistributedModel model(net, *group, {.bucket_cap_mb = 0.001, .gradient_as_bucket_view = view});
    torch::optim::SGD opt(net->parameters(), 0.05);
    opt.zero_grad();
    // This rank's k·b rows, as k micro-batches.
    auto xs = x.narrow(0, rank * b * k, b * k);
    auto ys = y.narrow(0, rank * b * k, b * k);
    for (int m = 0; m < k; ++m) {
      auto loss = torch::mse_loss(model.forward<NetImpl>(xs.narrow(0, m * b, b)), ys.narrow(0, m * b, b)) / k;
      if (m + 1 < k) {
        auto guard = model.no_sync();
        loss.backward();
        EXPECT_EQ(model.counters().all_reduces, 0) << "no all-reduce on a no_sync micro-step";
      } else {
        EXPECT_TRUE(model.require_backward_grad_sync());
        loss.backward();
      }
    }
    const auto c = model.counters();
    EXPECT_EQ(c.local_steps, k - 1);
    EXPECT_EQ(c.sync_steps, 1);
    EXPECT_EQ(c.all_reduces, static_cast<int64_t>(model.bucket_assignment().size()));
    opt.step();
    expect_same_parameters(*net, *reference, 1e-5, view ? "bucket view" : "copy");

    // The flag the Accelerator drives does the same as the guard.
    model.set_require_backward_grad_sync(false);
    torch::mse_loss(model.forward<NetImpl>(xs.narrow(0, 0, b)), ys.narrow(0, 0, b)).backward();
    EXPECT_EQ(model.counters().all_reduces, c.all_reduces);
    model.set_require_backward_grad_sync(true);
    torch::mse_loss(model.forward<NetImpl>(xs.narrow(0, 0, b)), ys.narrow(0, 0, b)).backward();
    EXPECT_EQ(model.counters().all_reduces, 2 * c.all_reduces);
  }
}

TEST_F(DistributedModelTest, FindUnusedParametersWithSkippedBranch) {
  auto [x, y] = global_data(5 * size, 13);
  auto uses_side = [](int r) { return r % 2 == 1; };  // rank 0 never uses it
  for (bool view : {false, true}) {
    // Reference: the average of every rank's loss, each with its own branch.
    torch::manual_seed(21);
    auto reference = std::make_shared<BranchNet>();
    torch::Tensor total;
    for (int r = 0; r < size; ++r) {
      auto l = torch::mse_loss(reference->forward(x.narrow(0, r * 5, 5), uses_side(r)), y.narrow(0, r * 5, 5));
      total = total.defined() ? total + l : l;
    }
    (total / size).backward();

    torch::manual_seed(21);
    auto net = std::make_shared<BranchNet>();
    // Tiny buckets: the side branch's buckets sit before the trunk's, so on
    // ranks skipping it the later buckets wait for the end of backward.
    acc::DistributedModel model(net, *group,
                                {.bucket_cap_mb = 0, .find_unused_parameters = true, .gradient_as_bucket_view = view});
    for (int step = 0; step < 2; ++step) {
      for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
      torch::mse_loss(net->forward(x.narrow(0, rank * 5, 5), uses_side(rank)), y.narrow(0, rank * 5, 5)).backward();
      for (const auto& item : reference->named_parameters()) {
        const auto& grad = net->named_parameters()[item.key()].grad();
        const bool globally_unused = item.key().rfind("side", 0) == 0 && size == 1;
        if (globally_unused) {
          EXPECT_FALSE(grad.defined()) << item.key() << " is unused everywhere: .grad must stay undefined";
          continue;
        }
        ASSERT_TRUE(grad.defined()) << item.key();
        EXPECT_LE((grad - item.value().grad()).abs().max().item<double>(), 1e-6) << item.key();
      }
    }
    const auto c = model.counters();
    if (!uses_side(rank)) {
      int64_t at_finalize = 0;
      for (const auto& bucket : c.buckets) at_finalize += bucket.launched_at_finalize;
      EXPECT_GT(at_finalize, 0) << "ranks skipping the branch complete those buckets at the end";
    }
  }

  // Without find_unused_parameters: a clear error on every rank, naming the parameter.
  torch::manual_seed(21);
  auto net = std::make_shared<BranchNet>();
  acc::DistributedModel strict(net, *group);
  const auto message = acc::testing::error_of([&] {
    torch::mse_loss(net->forward(x.narrow(0, rank * 5, 5), uses_side(rank)), y.narrow(0, rank * 5, 5)).backward();
  });
  EXPECT_NE(message.find("side.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("find_unused_parameters"), std::string::npos) << message;
  // The reducer is usable again afterwards.
  torch::mse_loss(net->forward(x.narrow(0, rank * 5, 5), true), y.narrow(0, rank * 5, 5)).backward();
  EXPECT_EQ(strict.counters().sync_steps, 2);
}

TEST_F(DistributedModelTest, BucketAssignment) {
  torch::manual_seed(1);
  auto net = std::make_shared<NetImpl>(10);  // fc1 8x10 (+10), fc2 10x16 (+16), fc3 16x4 (+4)
  const std::vector<std::string> expected_names = {"fc1.weight", "fc1.bias",   "fc2.weight",
                                                   "fc2.bias",   "fc3.weight", "fc3.bias"};
  {
    acc::DistributedModel model(net, *group);
    EXPECT_EQ(model.parameter_names(), expected_names);
    const std::vector<std::vector<std::size_t>> one = {{5, 4, 3, 2, 1, 0}};
    EXPECT_EQ(model.bucket_assignment(), one) << "default cap: one bucket, reverse registration order";
  }
  {
    acc::DistributedModel model(net, *group, {.bucket_cap_mb = 0});
    const std::vector<std::vector<std::size_t>> each = {{5}, {4}, {3}, {2}, {1}, {0}};
    EXPECT_EQ(model.bucket_assignment(), each) << "tiny cap: one bucket per parameter";
  }
  {
    // Cap of 704 bytes = fc2 (160+16 floats); the first bucket takes fc3 (64+4 floats = 272 B) only.
    const double cap = 704.0 / (1024 * 1024);
    acc::DistributedModel model(net, *group, {.bucket_cap_mb = cap}, {.first_bucket_cap_mb = 272.0 / (1024 * 1024)});
    const std::vector<std::vector<std::size_t>> layers = {{5, 4}, {3, 2}, {1, 0}};
    EXPECT_EQ(model.bucket_assignment(), layers);
    for (const auto& bucket : model.counters().buckets) EXPECT_LE(bucket.bytes, 704);
  }
  // The plan itself: dtype/device-homogeneous buckets, cap respected.
  using acc::detail::GradientSlotInfo;
  std::vector<GradientSlotInfo> slots = {{c10::kFloat, c10::Device(c10::kCPU), 100},
                                         {c10::kDouble, c10::Device(c10::kCPU), 10},
                                         {c10::kFloat, c10::Device(c10::kCPU), 100},
                                         {c10::kDouble, c10::Device(c10::kCPU), 10},
                                         {c10::kFloat, c10::Device(c10::kCPU), 300}};
  const auto plan = acc::detail::plan_gradient_buckets(slots, 800, 800);
  const std::vector<std::vector<std::size_t>> expected = {{4}, {3, 1}, {2, 0}};
  EXPECT_EQ(plan, expected);
}

TEST_F(DistributedModelTest, Fp16AndBf16CompressionStayWithinTolerance) {
  const int64_t b = 6;
  auto [x, y] = global_data(b * size, 17);
  for (auto hook : {acc::DDPCommunicationHookType::FP16, acc::DDPCommunicationHookType::BF16}) {
    auto reference = make_net(9);
    torch::optim::SGD ref_opt(reference->parameters(), 0.1);
    auto net = make_net(9);
    acc::DistributedModel model(net, *group, {.comm_hook = hook});
    torch::optim::SGD opt(net->parameters(), 0.1);
    train_side_by_side(*reference, ref_opt, model, opt, x, y, b, 3);
    const double tol = hook == acc::DDPCommunicationHookType::FP16 ? 2e-3 : 2e-2;
    expect_same_parameters(*net, *reference, tol, std::string(acc::to_string(hook)));
    int64_t fp32_bytes = 0;
    for (const auto& bucket : model.counters().buckets) fp32_bytes += bucket.bytes;
    EXPECT_EQ(model.counters().bytes_all_reduced, 3 * fp32_bytes / 2) << "16-bit values on the wire";
  }
}

TEST_F(DistributedModelTest, ErrorsAreRaisedOnEveryRank) {
  // A model without parameters.
  auto empty = acc::testing::error_of([&] { acc::DistributedModel m(std::make_shared<Empty>(), *group); });
  EXPECT_NE(empty.find("no trainable parameters"), std::string::npos) << empty;

  // A parameter on another device than the others (meta stands in for a GPU).
  {
    auto net = std::make_shared<torch::nn::Module>();
    net->register_parameter("host_weight", torch::zeros({3}));
    net->register_parameter("meta_weight", torch::empty({3}, torch::TensorOptions().device(torch::kMeta)));
    auto message = acc::testing::error_of([&] { acc::DistributedModel m(net, *group); });
    EXPECT_NE(message.find("meta_weight"), std::string::npos) << message;
    EXPECT_NE(message.find("meta"), std::string::npos) << message;
  }
  // A model whose tensors were never loaded (init_empty_weights): every
  // tensor is on the meta device, the same device, so it is refused by name.
  {
    auto net = acc::init_empty_weights([] { return torch::nn::Sequential(torch::nn::Linear(4, 3)); });
    acc::set_module_tensor_to_device(*net, "0.weight", torch::kCPU, torch::ones({3, 4}));
    auto message = acc::testing::error_of([&] { acc::DistributedModel m(net.ptr(), *group); });
    EXPECT_NE(message.find("0.bias is on the meta device"), std::string::npos) << message;
    EXPECT_NE(message.find("load_checkpoint_in_model"), std::string::npos) << message;
  }
  // Only rank 0 loaded: the others' empty tensors reach every rank (no hang).
  if (size > 1) {
    auto net = acc::init_empty_weights([] { return torch::nn::Sequential(torch::nn::Linear(4, 3)); });
    if (rank == 0) {
      acc::set_module_tensor_to_device(*net, "0.weight", torch::kCPU, torch::ones({3, 4}));
      acc::set_module_tensor_to_device(*net, "0.bias", torch::kCPU, torch::ones({3}));
    }
    auto message = acc::testing::error_of([&] { acc::DistributedModel m(net.ptr(), *group); });
    EXPECT_NE(message.find("on rank 1: 0.weight is on the meta device"), std::string::npos) << message;
  }

  // A problem on the last rank only reaches every rank, naming that rank.
  {
    acc::DistributedDataParallelKwargs kwargs;
    if (rank == size - 1) kwargs.comm_state_option = {{"matrix_approximation_rank", "1"}};
    auto message = acc::testing::error_of([&] { acc::DistributedModel m(make_net(1), *group, kwargs); });
    EXPECT_NE(message.find("on rank " + std::to_string(size - 1)), std::string::npos) << message;
    EXPECT_NE(message.find("comm_state_option"), std::string::npos) << message;
  }
  {
    auto message = acc::testing::error_of([&] {
      acc::DistributedModel m(make_net(1), *group,
                              {.comm_hook = acc::DDPCommunicationHookType::FP16,
                               .comm_wrapper = acc::DDPCommunicationHookType::BF16});
    });
    EXPECT_NE(message.find("comm_wrapper"), std::string::npos) << message;
  }

  // Ranks with different architectures.
  if (size > 1) {
    torch::manual_seed(1);
    auto net = std::make_shared<NetImpl>(rank == 1 ? 17 : 16);
    std::string message;
    try {
      acc::DistributedModel m(net, *group);
      message = "<no exception>";
    } catch (const acc::CollectiveMismatch& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("fc1.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
  }
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
