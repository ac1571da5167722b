// init_empty_weights (modeling/empty_weights.hpp): a model of a gibibyte built
// without its memory, the trees of module_trees.hpp built empty giving the
// same names, shapes, sizes, ties and device maps as built whole, tensors
// handed in from outside left alone, the thread itself again afterwards
// (also after a factory that throws), a checkpoint
// loaded into an empty model (values, ties, forward, backward and an optimizer
// step, a bf16 load and a map to the disk), what a partial load leaves on the
// meta device, and memory (the gradient's too) released by moving a model there.
// module_sizes_crosscheck runs Accelerate's own functions on the same trees
// built under its init_empty_weights.
#include "accelerate/modeling/empty_weights.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "accelerate/checkpoint/safetensors.hpp"
#include "accelerate/modeling/device_map.hpp"
#include "accelerate/modeling/load_checkpoint.hpp"
#include "accelerate/modeling/module_sizes.hpp"
#include "accelerate/modeling/module_tensors.hpp"
#include "common/test_helpers.hpp"
#include "module_trees.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {
namespace {

namespace acc = accelerate;
namespace fs = std::filesystem;
namespace trees = accelerate::testing::trees;
using acc::testing::error_of;

// This process's resident memory in MiB (VmRSS), or its peak (VmHWM).
std::int64_t status_mib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) / 1024;
  }
  return -1;
}
std::int64_t resident_mib() { return status_mib("VmRSS"); }

// Starts the peak over from the present resident memory (Linux 4.0 and
// later); false where the kernel refused.
bool reset_peak() {
  { std::ofstream("/proc/self/clear_refs") << "5"; }
  return status_mib("VmHWM") - resident_mib() < 16;
}

// Every parameter and buffer, in LibTorch's order, with what describes it.
struct TensorShape {
  std::string name;
  std::vector<std::int64_t> sizes;
  c10::ScalarType dtype;
  bool requires_grad;
  bool operator==(const TensorShape&) const = default;
};
std::vector<TensorShape> shapes(const torch::nn::Module& module) {
  std::vector<TensorShape> out;
  for (const auto& item : module.named_parameters()) {
    out.push_back({item.key(), item.value().sizes().vec(), item.value().scalar_type(), item.value().requires_grad()});
  }
  for (const auto& item : module.named_buffers()) {
    out.push_back({item.key(), item.value().sizes().vec(), item.value().scalar_type(), item.value().requires_grad()});
  }
  return out;
}

std::vector<std::string> all_names(const torch::nn::Module& module) {
  std::vector<std::string> names;
  for (const auto& t : shapes(module)) names.push_back(t.name);
  return names;
}

at::Tensor tensor_named(const torch::nn::Module& model, const std::string& name) {
  const auto params = model.named_parameters();
  return params.contains(name) ? params[name] : model.named_buffers()[name];
}

std::shared_ptr<torch::nn::Module> empty_tree(const std::string& name) {
  return acc::init_empty_weights([&] { return trees::all().at(name); });
}

// A tree's tensors under their first names, changed so that a load shows.
std::vector<std::pair<std::string, at::Tensor>> saved_state(const torch::nn::Module& model) {
  std::vector<std::pair<std::string, at::Tensor>> state;
  std::vector<const void*> seen;
  for (const auto& item : model.named_parameters()) {
    const void* impl = item.value().unsafeGetTensorImpl();
    if (std::find(seen.begin(), seen.end(), impl) != seen.end()) continue;  // a tied weight, once
    seen.push_back(impl);
    state.emplace_back(item.key(), item.value().detach() * 2 + 1);
  }
  for (const auto& item : model.named_buffers()) state.emplace_back(item.key(), item.value().detach() + 3);
  return state;
}

TEST(EmptyWeights, AModelOfAGibibyteTakesNoMemory) {
  if (!reset_peak()) GTEST_SKIP() << "the kernel did not reset the peak resident memory (/proc/self/clear_refs)";
  const auto before = resident_mib();
  auto model = acc::init_empty_weights(
      [] { return torch::nn::Sequential(torch::nn::Linear(16384, 16384), torch::nn::BatchNorm1d(16384)); });
  const auto peak = status_mib("VmHWM") - before;
  EXPECT_LT(peak, 64) << "building 1 GiB of weights empty took up to " << peak << " MiB more resident memory";
  EXPECT_EQ(acc::compute_module_sizes(*model).at(""), (16384LL * 16384 + 16384 * 5) * 4 + 8);
  // Every tensor is on the meta device but the counter, made from a host scalar.
  auto names = all_names(*model);
  std::erase(names, "1.num_batches_tracked");
  EXPECT_EQ(acc::meta_tensor_names(*model), names);
  EXPECT_TRUE(model[1]->as<torch::nn::BatchNorm1d>()->num_batches_tracked.device().is_cpu());
  EXPECT_TRUE(model[0]->as<torch::nn::Linear>()->weight.is_meta());
  EXPECT_TRUE(model[0]->as<torch::nn::Linear>()->weight.requires_grad());
}

TEST(EmptyWeights, TreesBuiltEmptyHaveTheShapesSizesTiesAndMapsOfTreesBuiltWhole) {
  for (const auto& [name, whole] : trees::all()) {
    SCOPED_TRACE(name);
    const auto empty = empty_tree(name);
    EXPECT_EQ(shapes(*empty), shapes(*whole));
    for (const auto& name : all_names(*empty)) EXPECT_TRUE(tensor_named(*empty, name).is_meta()) << name;
    EXPECT_EQ(acc::compute_module_sizes(*empty), acc::compute_module_sizes(*whole));
    EXPECT_EQ(acc::find_tied_parameters(*empty), acc::find_tied_parameters(*whole));
    const acc::MaxMemory budget{{"0", acc::compute_module_sizes(*whole).at("") / 2}, {"cpu", 1 << 20}};
    acc::PlacementOptions quiet;
    quiet.warn = [](const std::string&) {};
    EXPECT_EQ(acc::infer_auto_device_map(*empty, budget, quiet), acc::infer_auto_device_map(*whole, budget, quiet));
  }
  const auto lm = std::dynamic_pointer_cast<trees::LmImpl>(empty_tree("lm"));
  EXPECT_TRUE(lm->head->weight.is_same(lm->embed->weight));
}

TEST(EmptyWeights, TheThreadMakesTensorsWithMemoryAgainAfterwards) {
  (void)acc::init_empty_weights([] { return torch::nn::Linear(3, 2); });
  const auto host = torch::ones({4});
  EXPECT_TRUE(host.device().is_cpu());
  EXPECT_TRUE((host + 1).device().is_cpu());  // no Meta backend bit left behind
  EXPECT_EQ((host + 1).sum().item<float>(), 8.0f);
  EXPECT_THROW((void)acc::init_empty_weights(
                   []() -> torch::nn::Linear { throw std::runtime_error("the factory failed"); }),
               std::runtime_error);
  EXPECT_TRUE(torch::zeros({2}).device().is_cpu());
  EXPECT_EQ(torch::nn::Linear(3, 2)->weight.device().type(), c10::kCPU);
}

TEST(EmptyWeights, TensorsHandedInFromOutsideKeepTheirValues) {
  const auto table = torch::arange(6, torch::kFloat);
  auto pretrained = torch::nn::Linear(3, 2);
  const auto weight = pretrained->weight.detach().clone();
  auto model = acc::init_empty_weights([&] {
    auto m = std::make_shared<torch::nn::Module>();
    m->register_buffer("table", table);                // a shared table
    m->register_module("pretrained", pretrained);      // a module built before
    m->register_parameter("fresh", torch::ones({4}));  // made here: empty
    return m;
  });
  EXPECT_TRUE(torch::equal(table, torch::arange(6, torch::kFloat)));
  EXPECT_TRUE(torch::equal(pretrained->weight, weight));
  EXPECT_EQ(acc::meta_tensor_names(*model), std::vector<std::string>{"fresh"});
}

TEST(EmptyWeights, ACheckpointLoadsIntoAnEmptyModelThatThenTrains) {
  const fs::path dir = acc::testing::shared_temp_directory("empty_weights_load");
  // The tied tree: values land in the shared tensor, and the tie holds.
  {
    const auto source = trees::all().at("lm");
    const auto state = saved_state(*source);
    acc::checkpoint::save_safetensors(state, dir / "lm.safetensors");
    const auto lm = std::dynamic_pointer_cast<trees::LmImpl>(empty_tree("lm"));
    const auto report = acc::load_checkpoint_in_model(*lm, dir / "lm.safetensors", {.strict = true});
    EXPECT_TRUE(report.empty()) << report.to_string();
    EXPECT_TRUE(acc::meta_tensor_names(*lm).empty());
    for (const auto& [name, value] : state) {
      const auto tensor = tensor_named(*lm, name);
      EXPECT_TRUE(tensor.device().is_cpu()) << name;
      EXPECT_TRUE(torch::equal(tensor, value)) << name;
    }
    EXPECT_TRUE(lm->head->weight.is_same(lm->embed->weight));
    EXPECT_TRUE(torch::equal(lm->head->weight, state.front().second));
    EXPECT_TRUE(lm->embed->weight.requires_grad());
  }
  // A tree with a forward: the model loaded empty computes what the same
  // file loaded into a whole model computes, gets the same gradients, and an
  // optimizer built on it takes the same step.
  const auto state = saved_state(*trees::all().at("nested"));
  acc::checkpoint::save_safetensors(state, dir / "nested.safetensors");
  const auto whole = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(trees::all().at("nested"));
  const auto empty = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(empty_tree("nested"));
  for (const auto& model : {whole, empty}) {
    const auto report = acc::load_checkpoint_in_model(*model, dir / "nested.safetensors", {.strict = true});
    EXPECT_TRUE(report.empty()) << report.to_string();
  }
  torch::manual_seed(3);
  const auto input = torch::randn({5, 6});
  std::vector<at::Tensor> outputs;
  for (const auto& model : {whole, empty}) {
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    const auto output = model->forward(input);
    output.square().sum().backward();
    sgd.step();
    outputs.push_back(output.detach());
  }
  EXPECT_TRUE(torch::equal(outputs[0], outputs[1]));
  for (const auto& item : whole->named_parameters()) {
    const auto other = empty->named_parameters()[item.key()];
    ASSERT_TRUE(other.grad().defined()) << item.key();
    EXPECT_TRUE(torch::equal(other.grad(), item.value().grad())) << item.key();
    EXPECT_TRUE(torch::equal(other, item.value())) << item.key();
  }
  acc::testing::remove_shared_directory(dir);
}

TEST(EmptyWeights, ABf16FileLoadsInBf16WithABlockMappedFromTheDisk) {
  const fs::path dir = acc::testing::shared_temp_directory("empty_weights_bf16");
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (const auto& [name, value] : saved_state(*trees::all().at("lm"))) {
    state.emplace_back(name, value.is_floating_point() ? value.to(torch::kBFloat16) : value);
  }
  acc::checkpoint::save_safetensors(state, dir / "lm.safetensors");
  const auto lm = empty_tree("lm");
  acc::DeviceMap map{{"embed", "cpu"},    {"layers.0", "disk"}, {"layers.1", "cpu"}, {"layers.2", "cpu"},
                     {"layers.3", "cpu"}, {"norm", "cpu"},      {"head", "cpu"}};
  const auto report = acc::load_checkpoint_in_model(
      *lm, dir / "lm.safetensors",
      {.device_map = map, .offload_folder = dir / "offload", .dtype = torch::kBFloat16, .strict = true});
  EXPECT_TRUE(report.empty()) << report.to_string();
  EXPECT_TRUE(acc::meta_tensor_names(*lm).empty());
  for (const auto& [name, value] : state) {
    const auto tensor = tensor_named(*lm, name);
    EXPECT_EQ(tensor.scalar_type(), value.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(tensor, value)) << name;
  }
  EXPECT_TRUE(fs::exists(dir / "offload" / "layers.0.proj.weight.dat"));
  acc::testing::remove_shared_directory(dir);
}

TEST(EmptyWeights, APartialLoadLeavesTheRestOnTheMetaDeviceByName) {
  const fs::path dir = acc::testing::shared_temp_directory("empty_weights_partial");
  auto state = saved_state(*trees::all().at("nested"));
  std::vector<std::string> left_out;
  std::erase_if(state, [&](const auto& item) {
    const bool out = item.first.rfind("1.", 0) == 0;  // the second block
    if (out) left_out.push_back(item.first);
    return out;
  });
  acc::checkpoint::save_safetensors(state, dir / "part.safetensors");
  const auto model = empty_tree("nested");
  const auto report = acc::load_checkpoint_in_model(*model, dir / "part.safetensors");
  auto missing = report.missing;
  auto on_meta = acc::meta_tensor_names(*model);
  std::sort(missing.begin(), missing.end());
  std::sort(on_meta.begin(), on_meta.end());
  std::sort(left_out.begin(), left_out.end());
  EXPECT_EQ(missing, left_out);
  EXPECT_EQ(on_meta, left_out);
  // A meta tensor has no values to move.
  const auto message = error_of([&] { acc::set_module_tensor_to_device(*model, "1.proj.weight", torch::kCPU); });
  EXPECT_NE(message.find("set_module_tensor_to_device('1.proj.weight')"), std::string::npos) << message;
  EXPECT_NE(message.find("no values; give a value"), std::string::npos) << message;
  acc::testing::remove_shared_directory(dir);
}

TEST(EmptyWeights, MovingATensorToTheMetaDeviceReleasesItsMemory) {
  auto linear = torch::nn::Linear(8192, 8192);               // 256 MiB of weight
  linear->forward(torch::ones({1, 8192})).sum().backward();  // and as much of gradient
  const auto storage = linear->weight.storage().getWeakStorageImpl();
  const auto gradient = linear->weight.grad().storage().getWeakStorageImpl();
  const auto before = resident_mib();
  acc::move_to_meta_device(*linear);
  EXPECT_TRUE(storage.expired()) << "the weight's old storage is still held";
  EXPECT_TRUE(gradient.expired()) << "the weight's gradient is still held";
  EXPECT_TRUE(linear->bias.is_meta());
  EXPECT_FALSE(linear->weight.grad().defined());
#if !defined(__SANITIZE_ADDRESS__)  // ASan keeps freed blocks in quarantine
  const auto released = before - resident_mib();
  EXPECT_GT(released, 400) << "moving 512 MiB to the meta device released " << released << " MiB";
#else
  (void)before;
#endif
  EXPECT_TRUE(linear->weight.is_meta());
  EXPECT_TRUE(linear->named_parameters()["weight"].is_meta());
  EXPECT_TRUE(linear->weight.requires_grad());
  // And back, with a value: the same tensor, usable again.
  acc::set_module_tensor_to_device(*linear, "weight", torch::kCPU, torch::ones({8192, 8192}));
  EXPECT_EQ(linear->weight.sum().item<double>(), 8192.0 * 8192.0);
  acc::set_module_tensor_to_device(*linear, "bias", torch::kCPU, torch::zeros({8192}));
  linear->forward(torch::ones({1, 8192})).sum().backward();
  EXPECT_TRUE(linear->weight.grad().defined());
  // A trainable tensor takes floating-point values only (dtype casts floating-point values alone).
  acc::set_module_tensor_to_device(*linear, "bias", torch::kMeta);
  const auto message = acc::testing::error_of([&] {
    acc::set_module_tensor_to_device(*linear, "bias", torch::kCPU, torch::ones({8192}, torch::kLong), torch::kFloat);
  });
  EXPECT_NE(message.find("requires grad, but its value is Long"), std::string::npos) << message;
}

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
