// UnitPolicy (which submodules FULL_SHARD makes units) and the plugin's unit
// fields: classes match by full, unqualified or holder name; size_based_wrap
// claims bottom-up as FSDP's does; the plugin maps auto_wrap_policy onto
// them and refuses, naming the field, what it cannot do.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "accelerate/error.hpp"
#include "accelerate/training/fully_sharded_data_parallel_plugin.hpp"
#include "accelerate/training/unit_policy.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace acc = accelerate;
using Names = std::vector<std::string>;

struct LayerImpl : torch::nn::Module {
  explicit LayerImpl(int width) : fc(register_module("fc", torch::nn::Linear(width, width))) {}
  torch::nn::Linear fc;
};
TORCH_MODULE(Layer);

// embed (10x4 = 40), layers.0 and layers.1 (4x4+4 = 20 each), head (4x3+3 = 15).
struct NetImpl : torch::nn::Module {
  NetImpl()
      : embed(register_module("embed", torch::nn::Embedding(10, 4))),
        layers(register_module("layers", torch::nn::ModuleList(Layer(4), Layer(4)))),
        head(register_module("head", torch::nn::Linear(4, 3))) {}
  torch::nn::Embedding embed;
  torch::nn::ModuleList layers;
  torch::nn::Linear head;
};

TEST(UnitPolicy, MatchesClassesByFullUnqualifiedOrHolderName) {
  const Layer layer(4);
  EXPECT_TRUE(acc::module_class_is(*layer, "Layer"));
  EXPECT_TRUE(acc::module_class_is(*layer, layer->name()));
  EXPECT_FALSE(acc::module_class_is(*layer, "Lay"));
  EXPECT_FALSE(acc::module_class_is(*layer, "Linear"));
  NetImpl net;
  EXPECT_EQ(acc::UnitPolicy::by_class({"Layer"}).select(net), (Names{"layers.0", "layers.1"}));
  EXPECT_EQ(acc::UnitPolicy::by_class({"LayerImpl", "LinearImpl"}).select(net),
            (Names{"layers.0", "layers.0.fc", "layers.1", "layers.1.fc", "head"}));
}

TEST(UnitPolicy, SizeBasedClaimsBottomUp) {
  NetImpl net;
  // Each fc (20) is a unit; its Layer has nothing left to claim.
  EXPECT_EQ(acc::UnitPolicy::by_size(20).select(net), (Names{"embed", "layers.0.fc", "layers.1.fc"}));
  // The ModuleList gathers both layers (40); the head (15) stays with the root.
  EXPECT_EQ(acc::UnitPolicy::by_size(21).select(net), (Names{"embed", "layers"}));
  EXPECT_EQ(acc::UnitPolicy::by_size(1000).select(net), Names{});
  EXPECT_THROW((void)acc::UnitPolicy::by_size(0), acc::ConfigError);
}

TEST(UnitPolicy, DefaultIsTheChildrenOfASequentialOnly) {
  torch::nn::Sequential sequential(torch::nn::Linear(2, 2), torch::nn::ReLU(), torch::nn::Linear(2, 1));
  EXPECT_EQ(acc::UnitPolicy().select(*sequential), (Names{"0", "2"}));
  EXPECT_EQ(acc::UnitPolicy().select(NetImpl()), Names{});
  EXPECT_EQ(acc::UnitPolicy::none().select(*sequential), Names{});
}

TEST(FsdpPluginUnits, MapsAutoWrapPolicyOntoUnits) {
  NetImpl net;
  acc::FullyShardedDataParallelPlugin plugin;
  plugin.auto_wrap_policy = "transformer_based_wrap";
  plugin.transformer_cls_names_to_wrap = {"Layer"};
  EXPECT_EQ(acc::unit_policy_of(plugin).select(net), (Names{"layers.0", "layers.1"}));
  plugin = {};
  plugin.auto_wrap_policy = "SIZE_BASED_WRAP";
  plugin.min_num_params = 21;
  EXPECT_EQ(acc::unit_policy_of(plugin).select(net), (Names{"embed", "layers"}));
  plugin = {};
  plugin.wrap_module = [](const std::string& name, const torch::nn::Module&) { return name == "head"; };
  EXPECT_EQ(acc::unit_policy_of(plugin).select(net), Names{"head"});
  acc::check_plugin(plugin);
}

TEST(FsdpPluginUnits, RefusesWhatItCannotDoNamingTheField) {
  const auto refused = [](const std::function<void(acc::FullyShardedDataParallelPlugin&)>& set) {
    acc::FullyShardedDataParallelPlugin plugin;
    set(plugin);
    return acc::testing::error_of([&] { acc::check_plugin(plugin); });
  };
  EXPECT_NE(refused([](auto& p) { p.auto_wrap_policy = "transformer_based_wrap"; })
                .find("needs transformer_cls_names_to_wrap"),
            std::string::npos);
  EXPECT_NE(refused([](auto& p) { p.auto_wrap_policy = "layer_wise"; }).find("'layer_wise' is not one of"),
            std::string::npos);
  EXPECT_NE(refused([](auto& p) { p.min_num_params = 5; }).find("min_num_params is set"), std::string::npos);
  EXPECT_NE(refused([](auto& p) {
              p.auto_wrap_policy = "no_wrap";
              p.wrap_module = [](const std::string&, const torch::nn::Module&) { return true; };
            }).find("both auto_wrap_policy"),
            std::string::npos);
  EXPECT_NE(refused([](auto& p) { p.backward_prefetch = "BACKWARD_PRE"; }).find("backward_prefetch = BACKWARD_PRE"),
            std::string::npos);
  // Built for FULL_SHARD's units; refused where no unit is live.
  EXPECT_NE(refused([](auto& p) {
              p.sharding_strategy = "SHARD_GRAD_OP";
              p.activation_checkpointing = true;
            }).find("activation_checkpointing"),
            std::string::npos);
  EXPECT_NE(refused([](auto& p) { p.cpu_offload = true; }).find("cpu_offload"), std::string::npos);
  EXPECT_NE(refused([](auto& p) { p.state_dict_type = "LOCAL_STATE_DICT"; }).find("state_dict_type"),
            std::string::npos);
  EXPECT_NE(refused([](auto& p) { p.state_dict_type = "FULL_STATE"; }).find("is not one of FULL_STATE_DICT"),
            std::string::npos);
  EXPECT_NE(refused([](auto& p) { p.fsdp_version = 3; }).find("fsdp_version 3"), std::string::npos);
  EXPECT_NE(refused([](auto& p) { p.mixed_precision_policy = {{"bf16", "fp32", "bf16"}}; })
                .find("mixed_precision_policy"),
            std::string::npos);
  EXPECT_NE(refused([](auto& p) { p.ignored_modules.push_back(torch::nn::Linear(2, 2).ptr()); })
                .find("ignored_modules = 1 module(s)"),
            std::string::npos);
  EXPECT_NE(refused([](auto& p) { p.param_init_fn = [](torch::nn::Module&) {}; }).find("param_init_fn"),
            std::string::npos);
  // What it does is accepted.
  acc::FullyShardedDataParallelPlugin plugin;
  plugin.fsdp_version = 2;
  plugin.reshard_after_forward = true;
  plugin.backward_prefetch = "NO_PREFETCH";
  plugin.limit_all_gathers = false;
  plugin.use_orig_params = false;
  plugin.sync_module_states = true;
  plugin.state_dict_type = "sharded_state_dict";
  acc::check_plugin(plugin);
  plugin.state_dict_type = "FULL_STATE_DICT";  // the same file (whole tensors, written in pieces)
  acc::check_plugin(plugin);
  plugin.reshard_after_forward = false;  // units whole from forward to backward
  acc::check_plugin(plugin);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
