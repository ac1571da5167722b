#include "accelerate/training/local_sgd.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstddef>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/format.hpp"
#include "accelerate/training/accelerator.hpp"
#include "detail/profile_range.hpp"

namespace accelerate {

LocalSGD::LocalSGD(Accelerator& accelerator, DistributedModel& model, std::int64_t local_sgd_steps, bool enabled)
    : LocalSGD(accelerator.process_group(), model, local_sgd_steps, enabled) {}

LocalSGD::LocalSGD(ProcessGroup& group, DistributedModel& model, std::int64_t local_sgd_steps, bool enabled)
    : group_(group),
      model_(model),
      local_sgd_steps_(local_sgd_steps),
      enabled_(enabled && group.size() > 1),
      uncaught_(std::uncaught_exceptions()) {
  if (local_sgd_steps < 1) {
    throw ConfigError(
        format("LocalSGD: local_sgd_steps is {}; it is the number of optimizer steps between two "
               "parameter averages and must be at least 1.",
               local_sgd_steps));
  }
  if (model.fully_sharded() != nullptr) {
    throw ConfigError(
        "LocalSGD: the model's parameters are sharded (FULL_SHARD or HYBRID_SHARD): no rank holds the parameters to "
        "average, and under LocalSGD's no_sync the shards would get no gradient. Use LocalSGD with NO_SHARD, "
        "SHARD_GRAD_OP or DDP.");
  }
  if (enabled_) no_sync_.emplace(model.no_sync());
}

LocalSGD::~LocalSGD() noexcept(false) {
  const bool unwinding = std::uncaught_exceptions() > uncaught_;
  if (enabled_ && !unwinding) {
    // no_sync is lifted after this, by the member guard, even when the
    // average throws (a timeout).
    average_parameters();
  }
}

void LocalSGD::step() {
  ++num_steps_;
  if (enabled_ && num_steps_ % local_sgd_steps_ == 0) average_parameters();
}

void LocalSGD::average_parameters() {
  if (!enabled_) return;
  ACCELERATE_PROFILE_RANGE("accelerate::local_sgd_average");
  at::NoGradGuard no_grad;
  // One flat buffer per (dtype, device): one all-reduce each instead of one
  // per parameter. The parameter list is the same on every rank (checked
  // when the model was prepared), so the flat layouts agree.
  std::map<std::pair<at::ScalarType, std::string>, std::vector<at::Tensor>> groups;
  for (const auto& parameter : model_.module()->parameters(/*recurse=*/true)) {
    if (!parameter.requires_grad()) continue;
    groups[{parameter.scalar_type(), parameter.device().str()}].push_back(parameter);
  }
  for (auto& [key, parameters] : groups) {
    std::vector<at::Tensor> flat_views;
    flat_views.reserve(parameters.size());
    for (const auto& parameter : parameters) flat_views.push_back(parameter.reshape({-1}));
    at::Tensor flat = at::cat(flat_views);  // trainable, so floating-point: Avg applies
    AllReduceOptions average;
    average.op = ReduceOp::Avg;
    group_.all_reduce(flat, average);
    std::int64_t offset = 0;
    for (auto& parameter : parameters) {
      const std::int64_t n = parameter.numel();
      parameter.copy_(flat.narrow(0, offset, n).view(parameter.sizes()));
      offset += n;
    }
  }
  ++averages_;
}

}  // namespace accelerate
