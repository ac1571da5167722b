// The big-model size utilities on the trees of module_trees.hpp, against
// sizes worked out by hand: every tensor counted once however many names it
// has, dtype caps for floating-point tensors only, the largest layer with
// and without modules kept whole, tied parameters. module_sizes_crosscheck
// compares the same calls with Hugging Face Accelerate's own.
#include "accelerate/modeling/module_sizes.hpp"

#include <gtest/gtest.h>

#include "module_trees.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {
namespace {

namespace acc = accelerate;
namespace trees = accelerate::testing::trees;

TEST(ModuleSizes, EveryModuleAndTensorOfAnMlp) {
  const auto mlp = trees::all().at("mlp");
  const acc::ModuleSizes expected{{"", 768},        {"0", 416},        {"0.weight", 364}, {"0.bias", 52},
                                  {"2", 280},       {"2.weight", 260}, {"2.bias", 20},    {"4", 72},
                                  {"4.weight", 60}, {"4.bias", 12}};
  EXPECT_EQ(acc::compute_module_sizes(*mlp), expected);  // the activations hold nothing
  EXPECT_EQ(acc::compute_module_sizes(*mlp, at::kBFloat16).at(""), 384);
  EXPECT_EQ(acc::compute_module_sizes(*mlp, at::kDouble).at(""), 768);  // a cap, never a growth
  EXPECT_EQ(acc::compute_module_sizes(*mlp, at::kHalf, {{"0.weight", at::kFloat}}).at(""), 364 + (768 - 364) / 2);
  EXPECT_TRUE(acc::compute_module_sizes(*mlp, std::nullopt, {}, /*buffers_only=*/true).empty());
  const auto maximum = acc::calculate_maximum_sizes(*mlp);
  EXPECT_EQ(maximum.total_size, 768);
  EXPECT_EQ(maximum.largest_layer.size, 416);
  EXPECT_EQ(maximum.largest_layer.names, std::vector<std::string>{"0"});
}

TEST(ModuleSizes, SharedModulesAndTiedTensorsCountOnce) {
  const auto tied = trees::all().at("tied");
  const auto sizes = acc::compute_module_sizes(*tied);
  // embed 66 floats; block: proj 42 floats, norm 12, scale 6, positions 8 int64.
  EXPECT_EQ(sizes.at(""), 264 + 168 + 48 + 24 + 64);
  EXPECT_EQ(sizes.at("block"), 304);
  EXPECT_EQ(sizes.at("block.positions"), 64);
  EXPECT_EQ(sizes.count("block_again"), 0u);  // met first as "block"
  EXPECT_EQ(sizes.count("head.weight"), 0u);  // met first as "embed.weight"
  // bf16 halves the floats; the int64 buffer keeps its size.
  EXPECT_EQ(acc::compute_module_sizes(*tied, at::kBFloat16).at("block"), 84 + 24 + 12 + 64);
  EXPECT_EQ(acc::compute_module_sizes(*tied, std::nullopt, {}, true).at(""), 24 + 64);
  const std::vector<std::vector<std::string>> expected{
      {"embed.weight", "head.weight"},
      {"block.proj.weight", "block_again.proj.weight"},
      {"block.proj.bias", "block_again.proj.bias"},
      {"block.norm.weight", "block_again.norm.weight"},
      {"block.norm.bias", "block_again.norm.bias"},
  };
  EXPECT_EQ(acc::find_tied_parameters(*tied), expected);
  EXPECT_TRUE(acc::find_tied_parameters(*trees::all().at("mlp")).empty());
}

TEST(ModuleSizes, LayersListedAsNoSplitStayWhole) {
  const auto nested = trees::all().at("nested");
  const auto split = acc::calculate_maximum_sizes(*nested);
  EXPECT_EQ(split.total_size, 2 * 304 + 48);
  EXPECT_EQ(split.largest_layer.size, 168);  // a block's Linear
  EXPECT_EQ(split.largest_layer.names, (std::vector<std::string>{"0.proj", "1.proj"}));
  const auto whole = acc::calculate_maximum_sizes(*nested, {"Block"});
  EXPECT_EQ(whole.largest_layer.size, 304);
  EXPECT_EQ(whole.largest_layer.names, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(acc::module_class_name(*nested), "Sequential");
  EXPECT_EQ(acc::module_class_name(*nested->children().front()), "Block");
}

TEST(ModuleSizes, ChildrenBottomUpEndWithTheModel) {
  // Sequential(Block, Block, LayerNorm): each block's children before it, the
  // blocks in order, the model last.
  const auto nested = trees::all().at("nested");
  const auto children = nested->children();
  const auto block0 = children[0]->children();
  const auto block1 = children[1]->children();
  const std::vector<std::shared_ptr<torch::nn::Module>> expected{
      block0[0], block0[1], children[0], block1[0], block1[1], children[1], children[2], nested};
  EXPECT_EQ(acc::get_module_children_bottom_up(nested), expected);
  // A module without children is its own list.
  const auto leaf = children[2];
  EXPECT_EQ(acc::get_module_children_bottom_up(leaf), std::vector<std::shared_ptr<torch::nn::Module>>{leaf});
}

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
