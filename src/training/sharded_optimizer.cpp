#include "accelerate/training/sharded_optimizer.hpp"

#include <ATen/ATen.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "accelerate/error.hpp"
#include "detail/profile_range.hpp"

namespace accelerate {

namespace {

[[noreturn]] void sharding_error(const std::string& what) {
  throw ConfigError(detail::where() + " ShardedOptimizer: " + what);
}

}  // namespace

// One param group's flat space and this rank's shard of it.
struct ShardedOptimizer::FlatGroup {
  struct Bucket {
    std::int64_t begin = 0;  // flat range [begin, end) of parameters
    std::int64_t end = 0;
    std::int64_t slice = 0;         // elements per rank (padded bucket / N)
    std::int64_t shard_offset = 0;  // where this rank's slice starts in the shard
  };

  std::vector<at::Tensor> parameters;
  std::vector<std::int64_t> offsets;  // flat offset of each parameter; back() = total
  std::vector<Bucket> buckets;
  at::Tensor shard;

  [[nodiscard]] std::int64_t total() const { return offsets.back(); }

  // Calls fn(parameter index, offset in that parameter, offset in the flat
  // space, length) for every piece of a parameter inside flat [begin, end).
  template <typename Fn>
  void for_each_piece(std::int64_t begin, std::int64_t end, Fn&& fn) const {
    if (begin >= end) return;
    auto p = static_cast<std::size_t>(std::upper_bound(offsets.begin(), offsets.end(), begin) - offsets.begin() - 1);
    for (std::int64_t at = begin; at < end && p < parameters.size(); ++p) {
      const std::int64_t stop = std::min(end, offsets[p + 1]);
      if (stop > at) fn(p, at - offsets[p], at, stop - at);
      at = std::max(at, stop);
    }
  }

  // Flat [begin, end) of this rank's slice of bucket b (padding excluded).
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> owned(const Bucket& b, int rank) const {
    const std::int64_t begin = std::min(b.end, b.begin + rank * b.slice);
    return {begin, std::min(b.end, begin + b.slice)};
  }
};

ShardedOptimizer::ShardedOptimizer(torch::optim::Optimizer& optimizer, ProcessGroup& group, ShardingOptions options)
    : optimizer_(optimizer), group_(group), options_(options) {
  if (dynamic_cast<torch::optim::LBFGS*>(&optimizer) != nullptr) {
    sharding_error(
        "LBFGS couples every element of its parameters (line search, history), so it cannot step a shard. "
        "Use an element-wise optimizer (SGD, Adam, AdamW, RMSprop, Adagrad), or do not shard.");
  }
  if (!optimizer.state().empty()) {
    sharding_error(
        "the optimizer has already stepped (it holds state for the whole parameters). Shard it before "
        "its first step.");
  }
  if (!(options.bucket_cap_mb > 0)) {
    sharding_error("bucket_cap_mb is " + std::to_string(options.bucket_cap_mb) + "; it must be positive.");
  }
  const int size = group.size();
  torch::NoGradGuard no_grad;
  for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    auto& param_group = optimizer.param_groups()[g];
    FlatGroup flat;
    flat.offsets.push_back(0);
    for (const at::Tensor& p : param_group.params()) {
      if (!p.is_contiguous()) {
        sharding_error("parameter " + std::to_string(flat.parameters.size()) + " of param group " + std::to_string(g) +
                       " is not contiguous; shards are views of contiguous parameters.");
      }
      if (!flat.parameters.empty() && (p.scalar_type() != flat.parameters.front().scalar_type() ||
                                       p.device() != flat.parameters.front().device())) {
        sharding_error("param group " + std::to_string(g) +
                       " mixes dtypes or devices; one flat shard per group needs one of each. Split the group.");
      }
      flat.parameters.push_back(p);
      flat.offsets.push_back(flat.offsets.back() + p.numel());
    }
    if (flat.parameters.empty()) sharding_error("param group " + std::to_string(g) + " has no parameters.");
    // Rank 0's values everywhere, as DistributedModel does: in stage 2 the
    // module is not wrapped, and the shards must start from one model.
    for (at::Tensor& p : flat.parameters) {
      at::Tensor values = p.detach();
      group.broadcast(values);
    }
    // Every rank must cut the same buckets: compare the group's size.
    auto counts = at::tensor({flat.total(), -flat.total()}, at::kLong);
    AllReduceOptions max;
    max.op = ReduceOp::Max;
    group.all_reduce(counts, max);
    if (counts[0].item<std::int64_t>() != -counts[1].item<std::int64_t>()) {
      sharding_error("param group " + std::to_string(g) + " has " + std::to_string(flat.total()) +
                     " elements on this rank but not on every rank. Every rank must shard the same model.");
    }
    const auto element_size = static_cast<std::int64_t>(flat.parameters.front().element_size());
    const auto cap =
        std::max<std::int64_t>(size, static_cast<std::int64_t>(options.bucket_cap_mb * 1024.0 * 1024.0) / element_size);
    std::int64_t shard_elements = 0;
    for (std::int64_t begin = 0; begin < flat.total(); begin += cap) {
      FlatGroup::Bucket bucket;
      bucket.begin = begin;
      bucket.end = std::min(flat.total(), begin + cap);
      bucket.slice = (bucket.end - bucket.begin + size - 1) / size;
      bucket.shard_offset = shard_elements;
      shard_elements += bucket.slice;
      flat.buckets.push_back(bucket);
    }
    flat.shard = at::zeros({shard_elements}, flat.parameters.front().options());  // zero padding
    param_group.params() = {flat.shard};
    groups_.push_back(std::move(flat));
  }
}

ShardedOptimizer::~ShardedOptimizer() = default;

checkpoint::ShardLayout ShardedOptimizer::shard_layout() const {
  checkpoint::ShardLayout layout;
  layout.world_size = group_.size();
  for (const FlatGroup& flat : groups_) {
    checkpoint::ShardLayout::Group group;
    group.parameters = flat.parameters;
    for (const FlatGroup::Bucket& bucket : flat.buckets) {
      const auto [begin, end] = flat.owned(bucket, group_.rank());
      flat.for_each_piece(begin, end, [&](std::size_t p, std::int64_t in_param, std::int64_t at, std::int64_t n) {
        group.pieces.push_back({p, in_param, n, bucket.shard_offset + (at - begin)});
      });
    }
    layout.groups.push_back(std::move(group));
  }
  return layout;
}

void ShardedOptimizer::parameters_into_shard(FlatGroup& flat) {
  const int rank = group_.rank();
  for (const auto& bucket : flat.buckets) {
    const auto [begin, end] = flat.owned(bucket, rank);
    flat.for_each_piece(begin, end, [&](std::size_t p, std::int64_t in_param, std::int64_t at, std::int64_t n) {
      flat.shard.narrow(0, bucket.shard_offset + (at - begin), n)
          .copy_(flat.parameters[p].detach().view({-1}).narrow(0, in_param, n));
    });
  }
}

void ShardedOptimizer::gradients_into_shard(FlatGroup& flat) {
  const int size = group_.size();
  const int rank = group_.rank();
  if (!flat.shard.grad().defined()) flat.shard.mutable_grad() = at::zeros_like(flat.shard);
  at::Tensor shard_grad = flat.shard.grad();
  for (const auto& bucket : flat.buckets) {
    at::Tensor target = shard_grad.narrow(0, bucket.shard_offset, bucket.slice);
    if (options_.stage == ZeroStage::OptimizerState) {
      // Averaged already: copy this rank's pieces.
      target.zero_();
      const auto [begin, end] = flat.owned(bucket, rank);
      flat.for_each_piece(begin, end, [&](std::size_t p, std::int64_t in_param, std::int64_t at, std::int64_t n) {
        const at::Tensor& grad = flat.parameters[p].grad();
        if (grad.defined()) target.narrow(0, at - begin, n).copy_(grad.view({-1}).narrow(0, in_param, n));
      });
      continue;
    }
    // Stage 2: the whole bucket, padded, reduce-scattered; block r to rank r.
    at::Tensor input = at::zeros({bucket.slice * size}, flat.shard.options());
    flat.for_each_piece(bucket.begin, bucket.end,
                        [&](std::size_t p, std::int64_t in_param, std::int64_t at, std::int64_t n) {
                          const at::Tensor& grad = flat.parameters[p].grad();
                          if (grad.defined()) {
                            input.narrow(0, at - bucket.begin, n).copy_(grad.view({-1}).narrow(0, in_param, n));
                          }
                        });
    ReduceScatterOptions average;
    average.op = ReduceOp::Avg;
    target.copy_(group_.reduce_scatter(input, average));
  }
  if (options_.stage == ZeroStage::Gradients) {
    // The shard holds what this rank needs: the full gradients go.
    for (at::Tensor& p : flat.parameters) p.mutable_grad() = at::Tensor();
  }
}

void ShardedOptimizer::gather_parameters(FlatGroup& flat) {
  for (const auto& bucket : flat.buckets) {
    const at::Tensor gathered = group_.all_gather(flat.shard.narrow(0, bucket.shard_offset, bucket.slice).contiguous());
    flat.for_each_piece(
        bucket.begin, bucket.end, [&](std::size_t p, std::int64_t in_param, std::int64_t at, std::int64_t n) {
          flat.parameters[p].detach().view({-1}).narrow(0, in_param, n).copy_(gathered.narrow(0, at - bucket.begin, n));
        });
  }
}

void ShardedOptimizer::step() {
  ACCELERATE_PROFILE_RANGE("accelerate::ShardedOptimizer::step");
  torch::NoGradGuard no_grad;
  reduce_gradients();
  for (FlatGroup& flat : groups_) parameters_into_shard(flat);
  optimizer_.step();
  reduced_ = false;
  for (FlatGroup& flat : groups_) gather_parameters(flat);
}

void ShardedOptimizer::reduce_gradients() {
  if (reduced_) return;
  torch::NoGradGuard no_grad;
  for (FlatGroup& flat : groups_) gradients_into_shard(flat);
  reduced_ = true;
}

double ShardedOptimizer::clip_grad_norm_(double max_norm, double norm_type) {
  reduce_gradients();
  torch::NoGradGuard no_grad;
  const bool infinity = std::isinf(norm_type);
  // Padding holds zero gradients, so it adds nothing to either norm.
  double local = 0;
  for (const FlatGroup& flat : groups_) {
    const at::Tensor grad = flat.shard.grad().to(at::kDouble);
    local = infinity ? std::max(local, grad.abs().max().item<double>())
                     : local + grad.abs().pow(norm_type).sum().item<double>();
  }
  at::Tensor total = at::full({1}, local, at::kDouble);
  AllReduceOptions reduce;
  reduce.op = infinity ? ReduceOp::Max : ReduceOp::Sum;
  group_.all_reduce(total, reduce);
  const double norm = infinity ? total.item<double>() : std::pow(total.item<double>(), 1.0 / norm_type);
  const double coefficient = max_norm / (norm + 1e-6);  // torch's clip_grad_norm_ rule
  if (coefficient < 1.0) {
    for (FlatGroup& flat : groups_) flat.shard.mutable_grad().mul_(coefficient);
  }
  return norm;
}

void ShardedOptimizer::clip_grad_value_(double clip_value) {
  reduce_gradients();
  torch::NoGradGuard no_grad;
  for (FlatGroup& flat : groups_) flat.shard.mutable_grad().clamp_(-clip_value, clip_value);
}

void ShardedOptimizer::zero_grad(bool set_to_none) {
  reduced_ = false;
  for (FlatGroup& flat : groups_) {
    if (set_to_none) {
      flat.shard.mutable_grad() = at::Tensor();
    } else if (flat.shard.grad().defined()) {
      flat.shard.mutable_grad().zero_();
    }
    for (at::Tensor& p : flat.parameters) {
      if (!p.grad().defined()) continue;
      if (set_to_none) {
        p.mutable_grad() = at::Tensor();
      } else {
        p.mutable_grad().detach_().zero_();
      }
    }
  }
}

std::int64_t ShardedOptimizer::total_elements() const noexcept {
  std::int64_t total = 0;
  for (const FlatGroup& flat : groups_) total += flat.total();
  return total;
}

std::int64_t ShardedOptimizer::shard_elements() const noexcept {
  std::int64_t total = 0;
  for (const FlatGroup& flat : groups_) total += flat.shard.numel();
  return total;
}

const at::Tensor& ShardedOptimizer::shard(std::size_t g) const {
  if (g >= groups_.size()) {
    sharding_error("param group " + std::to_string(g) + " requested; there are " + std::to_string(groups_.size()) +
                   ".");
  }
  return groups_[g].shard;
}

}  // namespace accelerate
