#include "training/distinct_parameters.hpp"

#include <torch/optim/optimizer.h>

#include <map>
#include <set>

#include "accelerate/error.hpp"

namespace accelerate::training_detail {

std::vector<at::Tensor> distinct_tensors(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> distinct;
  distinct.reserve(tensors.size());
  std::set<const c10::TensorImpl*> seen;
  for (const at::Tensor& tensor : tensors) {
    if (!tensor.defined() || seen.insert(tensor.unsafeGetTensorImpl()).second) distinct.push_back(tensor);
  }
  return distinct;
}

std::size_t deduplicate_param_groups(torch::optim::Optimizer& optimizer, const std::string& who) {
  std::map<const c10::TensorImpl*, std::size_t> group_of;
  std::size_t removed = 0;
  for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    std::vector<at::Tensor>& params = optimizer.param_groups()[g].params();
    std::vector<at::Tensor> kept;
    kept.reserve(params.size());
    for (const at::Tensor& p : params) {
      const auto [known, added] = group_of.emplace(p.unsafeGetTensorImpl(), g);
      if (added) {
        kept.push_back(p);
      } else if (known->second == g) {
        ++removed;  // a tied weight listed again in its group: stepped once
      } else {
        throw ConfigError(who + ": a parameter of param group " + std::to_string(g) + " is also in param group " +
                          std::to_string(known->second) +
                          "; a parameter can be in one param group only, or the optimizer steps it once per group. "
                          "Put each tensor (a tied weight is one tensor under several names) in one group.");
      }
    }
    if (kept.size() != params.size()) params = std::move(kept);
  }
  return removed;
}

}  // namespace accelerate::training_detail
