// UnitPolicy: which submodules of a model FULL_SHARD makes units, FSDP's
// auto-wrap policies in C++.
//
// A unit's parameters are whole only around its own forward and backward;
// every parameter no unit claims (a tied head included) belongs to the root
// unit, whole from the start of forward to the end of its backward. Units
// may nest: a parameter belongs to the innermost unit that holds it, and one
// held by two units that do not nest (a weight tied across blocks) to the
// nearest unit around both.
//
//   UnitPolicy::by_class({"Block"})       // transformer_based_wrap: every BlockImpl
//   UnitPolicy::by_size(1'000'000)        // size_based_wrap
//   UnitPolicy::by_predicate([](const std::string& name, const torch::nn::Module&) {
//     return name.starts_with("blocks.");  // the user marks them
//   })
//
// A unit that is not a child of a torch::nn::Sequential says where its
// forward begins and ends (ShardedUnitScope, two lines in its class's
// forward): LibTorch modules have no forward hooks (docs/sharding.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace torch::nn {
class Module;
}

namespace accelerate {

class UnitPolicy {
 public:
  using Predicate = std::function<bool(const std::string& name, const torch::nn::Module& module)>;

  /// The default: the children of a torch::nn::Sequential that hold
  /// parameters; no unit below any other module (the root holds everything).
  UnitPolicy() = default;
  /// No unit: the whole model is the root unit (FSDP's no_wrap).
  static UnitPolicy none();
  /// Every submodule whose class is one of `class_names`
  /// (transformer_based_wrap; module_class_is says how names match).
  static UnitPolicy by_class(std::vector<std::string> class_names);
  /// FSDP's size_based_wrap, bottom-up: a submodule becomes a unit when the
  /// parameters below it that no unit below it claims number at least
  /// `min_num_params`.
  static UnitPolicy by_size(std::int64_t min_num_params);
  /// Every submodule for which `is_unit(name, module)` holds; `name` is its
  /// qualified name from the root ("blocks.0").
  static UnitPolicy by_predicate(Predicate is_unit);

  /// The qualified names of `root`'s units, in the order the policy found them.
  [[nodiscard]] std::vector<std::string> select(const torch::nn::Module& root) const;

 private:
  using Select = std::function<std::vector<std::string>(const torch::nn::Module& root)>;
  explicit UnitPolicy(Select select) : select_(std::move(select)) {}
  Select select_;
};

/// Whether `module`'s class is `class_name`: its full C++ name
/// ("gpt::BlockImpl"), that name without namespaces ("BlockImpl"), or that
/// without a trailing "Impl" ("Block", the TORCH_MODULE holder's name).
bool module_class_is(const torch::nn::Module& module, std::string_view class_name);

}  // namespace accelerate
