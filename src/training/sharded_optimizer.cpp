#include "accelerate/training/sharded_optimizer.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "accelerate/comm/work.hpp"
#include "accelerate/error.hpp"
#include "detail/profile_range.hpp"
#include "training/distinct_parameters.hpp"
#include "training/flat_alias.hpp"
#include "training/gradient_ready_hook.hpp"
#include "training/meta_tensor_check.hpp"
#include "training/replica_groups.hpp"
#include "training/shard_clipping.hpp"

namespace accelerate {

namespace {

[[noreturn]] void sharding_error(const std::string& what) { throw ConfigError("ShardedOptimizer: " + what); }

// Buckets whose reduce-scatter may be in flight at once. Each holds its
// padded input until it completes; two let one bucket's communication
// overlap the next bucket's gradients without the inputs piling up.
constexpr std::size_t kMaxInFlight = 2;

// Replicas to average the shards over: none, or a group of one, means none.
ProcessGroup* replicas_of(const ShardingOptions& options) {
  return training_detail::effective_replicas(options.replicas);
}

AllReduceOptions maximum() {
  AllReduceOptions max;
  max.op = ReduceOp::Max;
  return max;
}

using training_detail::AccumulatorPtr;
using training_detail::GradientReadyHook;

}  // namespace

struct ShardedOptimizer::Hooks {
  std::vector<AccumulatorPtr> accumulators;
  std::vector<uintptr_t> keys;
  std::thread::id owner = std::this_thread::get_id();
};

using training_detail::alias_of;

// One param group's flat space and this rank's shard of it.
struct ShardedOptimizer::FlatGroup {
  struct Bucket {
    std::int64_t begin = 0;  // flat range [begin, end) of parameters
    std::int64_t end = 0;
    std::int64_t slice = 0;         // elements per rank (bucket / N; the last bucket padded)
    std::int64_t shard_offset = 0;  // where this rank's slice starts in the shard's gradient
    // Stage 2's reduction of this step:
    std::vector<std::size_t> parameters;  // those with elements in the bucket
    std::size_t pending = 0;              // of them, not yet copied into `input`
    at::Tensor input;                     // the padded local gradients (slice × N)
    at::Tensor output;                    // this rank's slice of the shard's gradient
    std::unique_ptr<Work> work;
  };

  std::vector<at::Tensor> parameters;
  std::vector<std::int64_t> offsets;  // flat offset of each parameter; back() = total
  std::vector<Bucket> buckets;
  std::vector<std::vector<std::size_t>> buckets_of;  // per parameter, the buckets it has elements in
  std::vector<bool> taken;                           // per parameter: its gradient is in the buckets this step
  // The parameters' storage: the flat space, padded at the end to whole
  // slices. Every parameter's data is a view of it, so this rank's slice of a
  // bucket is a range of it that the optimizer steps in place.
  at::Tensor buffer;
  std::vector<at::Tensor> slices;  // per bucket, this rank's range of `buffer`: the optimizer's parameters
  at::Tensor shard_grad;           // the slices' gradients, back to back (their .grad are views of it)
  std::int64_t shard_elements = 0;

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
  if (options.stage == ZeroStage::Parameters) {
    sharding_error(
        "stage 3 shards the parameters, which an optimizer does not hold; shard the model with "
        "FullyShardedModel and build the optimizer over its parameters().");
  }
  if (!(options.bucket_cap_mb > 0)) {
    sharding_error("bucket_cap_mb is " + std::to_string(options.bucket_cap_mb) + "; it must be positive.");
  }
  const int size = group.size();
  torch::NoGradGuard no_grad;
  ProcessGroup* const replicas = replicas_of(options);
  if (options.replicas != nullptr) {
    training_detail::require_matching_replicas(group, *options.replicas,
                                               [](const std::string& reason) { sharding_error(reason); });
  }
  // A tied weight (LibTorch's parameters() lists it under each of its names)
  // is listed once: one range of the flat space, stepped and clipped once.
  training_detail::deduplicate_param_groups(optimizer, "ShardedOptimizer");
  std::vector<std::pair<std::string, at::Tensor>> stepped;
  for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    const auto& params = optimizer.param_groups()[g].params();
    for (std::size_t p = 0; p < params.size(); ++p) {
      stepped.emplace_back("parameter " + std::to_string(p) + " of param group " + std::to_string(g), params[p]);
    }
  }
  training_detail::refuse_meta_tensors(stepped, {&group, replicas}, "ShardedOptimizer",
                                       "building and sharding its optimizer");
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
    for (std::size_t p = 0; p < flat.parameters.size(); ++p) {
      at::Tensor values = flat.parameters[p].detach();
      group.broadcast(values);
      if (replicas != nullptr) replicas->broadcast(values);  // the first copy's rank 0 everywhere
    }
    // Every rank must cut the same buckets: compare the group's size.
    auto counts = at::tensor({flat.total(), -flat.total()}, at::kLong);
    group.all_reduce(counts, maximum());
    if (replicas != nullptr) replicas->all_reduce(counts, maximum());
    if (counts[0].item<std::int64_t>() != -counts[1].item<std::int64_t>()) {
      sharding_error("param group " + std::to_string(g) + " has " + std::to_string(flat.total()) +
                     " elements on this rank but not on every rank. Every rank must shard the same model.");
    }
    const auto element_size = static_cast<std::int64_t>(flat.parameters.front().element_size());
    // Buckets of a multiple of N elements: each is N whole slices, and only
    // the last needs padding, at the end of the buffer.
    const auto cap = std::max<std::int64_t>(size, static_cast<std::int64_t>(options.bucket_cap_mb * 1024.0 * 1024.0) /
                                                      element_size / size * size);
    std::int64_t shard_elements = 0;
    for (std::int64_t begin = 0; begin < flat.total(); begin += cap) {
      FlatGroup::Bucket bucket;
      bucket.begin = begin;
      bucket.end = std::min(flat.total(), begin + cap);
      bucket.slice = (bucket.end - bucket.begin + size - 1) / size;
      bucket.shard_offset = shard_elements;
      shard_elements += bucket.slice;
      flat.buckets.push_back(std::move(bucket));
    }
    flat.buckets_of.resize(flat.parameters.size());
    flat.taken.assign(flat.parameters.size(), false);
    for (std::size_t b = 0; b < flat.buckets.size(); ++b) {
      auto& bucket = flat.buckets[b];
      flat.for_each_piece(bucket.begin, bucket.end, [&](std::size_t p, std::int64_t, std::int64_t, std::int64_t) {
        bucket.parameters.push_back(p);
        flat.buckets_of[p].push_back(b);
      });
      bucket.pending = bucket.parameters.size();
    }
    flat.shard_elements = shard_elements;
    // Filled parameter by parameter, each one's old storage freed as it is
    // aliased: the model is not held twice while the buffer fills. A group of
    // empty parameters has no bucket and an empty buffer.
    const std::int64_t padded = flat.buckets.empty() ? 0 : flat.buckets.back().begin + flat.buckets.back().slice * size;
    flat.buffer = at::empty({padded}, flat.parameters.front().options());
    flat.buffer.narrow(0, flat.total(), flat.buffer.numel() - flat.total()).zero_();  // padding
    for (std::size_t p = 0; p < flat.parameters.size(); ++p) alias_parameter(flat, p);
    for (const auto& bucket : flat.buckets) {
      flat.slices.push_back(alias_of(flat.buffer, bucket.begin + group.rank() * bucket.slice, {bucket.slice}));
    }
    param_group.params() = flat.slices;
    groups_.push_back(std::move(flat));
  }
  // The same order on every rank, so the ranks' collectives match: the last
  // bucket first, as backward produces the last layers' gradients first.
  for (std::size_t g = groups_.size(); g-- > 0;) {
    for (std::size_t b = groups_[g].buckets.size(); b-- > 0;) launch_order_.push_back({g, b});
  }
  if (options_.stage == ZeroStage::Gradients && options_.reduce_in_backward) register_hooks();
}

ShardedOptimizer::~ShardedOptimizer() {
  if (hooks_) {
    for (std::size_t k = 0; k < hooks_->accumulators.size(); ++k) {
      hooks_->accumulators[k]->del_post_hook(hooks_->keys[k]);
    }
  }
  // Dropping in-flight work waits for it (Work's destructor).
}

void ShardedOptimizer::register_hooks() {
  hooks_ = std::make_unique<Hooks>();
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (std::size_t p = 0; p < groups_[g].parameters.size(); ++p) {
      // A parameter without an accumulator (frozen, or not a leaf) never
      // gets a gradient in backward; step() takes whatever it holds.
      auto accumulator = torch::autograd::impl::grad_accumulator(groups_[g].parameters[p]);
      if (!accumulator) continue;
      hooks_->keys.push_back(
          accumulator->add_post_hook(std::make_unique<GradientReadyHook>([this, g, p] { on_gradient_ready(g, p); })));
      hooks_->accumulators.push_back(std::move(accumulator));
    }
  }
}

void ShardedOptimizer::on_gradient_ready(std::size_t g, std::size_t p) {
  if (options_.sync_in_backward && !options_.sync_in_backward()) return;  // a micro-step: accumulate locally
  // MPI is used FUNNELED: only the thread that built the optimizer (which runs
  // the CPU autograd graph) posts MPI collectives. CUDA gradients arrive on
  // autograd's device thread, where NCCL may be called, except in debug mode,
  // whose checks go through MPI. Elsewhere step() reduces them.
  if (std::this_thread::get_id() != hooks_->owner && (!groups_[g].parameters[p].is_cuda() || group_.debug_mode())) {
    return;
  }
  FlatGroup& flat = groups_[g];
  if (reduced_) {
    sharding_error("a gradient of parameter " + std::to_string(p) + " of param group " + std::to_string(g) +
                   " arrived after this step's gradients were reduced (by clipping, unscaling or "
                   "reduce_gradients()) and before step(). Run every backward of a step before reducing its "
                   "gradients.");
  }
  if (flat.taken[p]) {
    sharding_error("parameter " + std::to_string(p) + " of param group " + std::to_string(g) +
                   " received a second gradient before step(): its first one was already reduce-scattered. "
                   "Run the backward passes that only accumulate with sync_in_backward answering false (the "
                   "Accelerator's accumulate() or a model's no_sync()), or set reduce_in_backward to false.");
  }
  torch::NoGradGuard no_grad;
  try {
    if (!backward_open_) {
      backward_open_ = true;
      torch::autograd::Engine::get_default_engine().queue_callback([this] { end_of_backward(); });
    }
    take_gradient(flat, p);
    launch_ready_buckets(/*in_backward=*/true);
  } catch (...) {
    abandon_reduction();
    throw;
  }
}

void ShardedOptimizer::take_gradient(FlatGroup& flat, std::size_t p) {
  at::Tensor& parameter = flat.parameters[p];
  const at::Tensor grad = parameter.grad().defined() ? parameter.grad().reshape({-1}) : at::Tensor();
  copy_gradient(flat, p, grad);
  // The bucket holds it now: the whole gradient goes.
  parameter.mutable_grad() = at::Tensor();
}

void ShardedOptimizer::copy_gradient(FlatGroup& flat, std::size_t p, const at::Tensor& grad) {
  const int size = group_.size();
  for (const std::size_t b : flat.buckets_of[p]) {
    auto& bucket = flat.buckets[b];
    if (!bucket.input.defined()) {
      bucket.input = at::empty({bucket.slice * size}, flat.buffer.options());
      const std::int64_t used = bucket.end - bucket.begin;
      bucket.input.narrow(0, used, bucket.input.numel() - used).zero_();  // padding
    }
    const std::int64_t begin = std::max(bucket.begin, flat.offsets[p]);
    const std::int64_t end = std::min(bucket.end, flat.offsets[p + 1]);
    at::Tensor target = bucket.input.narrow(0, begin - bucket.begin, end - begin);
    if (grad.defined()) {
      target.copy_(grad.narrow(0, begin - flat.offsets[p], end - begin));
    } else {
      target.zero_();
    }
    --bucket.pending;
  }
  flat.taken[p] = true;
}

void ShardedOptimizer::launch_ready_buckets(bool in_backward) {
  while (next_launch_ < launch_order_.size()) {
    const BucketId id = launch_order_[next_launch_];
    if (groups_[id.group].buckets[id.bucket].pending != 0) return;
    launch(id, in_backward);
    ++next_launch_;
  }
}

void ShardedOptimizer::launch(const BucketId& id, bool in_backward) {
  ACCELERATE_PROFILE_RANGE("accelerate::ShardedOptimizer::reduce_scatter");
  FlatGroup& flat = groups_[id.group];
  auto& bucket = flat.buckets[id.bucket];
  while (in_flight_.size() >= kMaxInFlight) wait_oldest();
  link_shard_grad(flat);
  bucket.output = flat.shard_grad.narrow(0, bucket.shard_offset, bucket.slice);
  ReduceScatterOptions average;
  average.op = ReduceOp::Avg;
  bucket.work = group_.reduce_scatter_async(bucket.output, bucket.input, average);
  in_flight_.push_back(next_launch_);
  if (in_backward) ++reduced_in_backward_;
  // Free the inputs of what has completed (on one node, the reduce-scatter
  // through shared memory completes within the call): backward then holds
  // only the buckets still filling. Not with replicas: waiting posts the
  // cross-node all-reduce, which every rank must post at the same point,
  // not when its own reduce-scatter happened to finish.
  while (replicas_of(options_) == nullptr && !in_flight_.empty()) {
    const BucketId oldest = launch_order_[in_flight_.front()];
    if (!groups_[oldest.group].buckets[oldest.bucket].work->is_completed()) break;
    wait_oldest();
  }
}

void ShardedOptimizer::wait_oldest() {
  const std::size_t index = in_flight_.front();
  const BucketId id = launch_order_[index];
  auto& bucket = groups_[id.group].buckets[id.bucket];
  in_flight_.erase(in_flight_.begin());
  auto work = std::move(bucket.work);
  bucket.input = at::Tensor();
  ProcessGroup* const replicas = replicas_of(options_);
  if (replicas == nullptr) bucket.output = at::Tensor();
  work->wait();
  if (replicas != nullptr) {
    // The group's average, averaged over the copies: every rank's average
    // (the copies are the same size). In the order launched, on every rank.
    while (replicating_.size() >= kMaxInFlight) wait_replica_oldest();
    AllReduceOptions average;
    average.op = ReduceOp::Avg;
    bucket.work = replicas->all_reduce_async(bucket.output, average);
    replicating_.push_back(index);
  }
}

void ShardedOptimizer::wait_replica_oldest() {
  const BucketId id = launch_order_[replicating_.front()];
  auto& bucket = groups_[id.group].buckets[id.bucket];
  replicating_.erase(replicating_.begin());
  auto work = std::move(bucket.work);
  bucket.output = at::Tensor();
  work->wait();
}

void ShardedOptimizer::launch_remaining(bool in_backward) {
  // What backward left: buckets with parameters that got no gradient in it
  // (unused on this rank, or accumulated in a micro-step), in the one launch order.
  for (std::size_t i = next_launch_; i < launch_order_.size(); ++i) {
    const BucketId id = launch_order_[i];
    FlatGroup& flat = groups_[id.group];
    for (const std::size_t p : flat.buckets[id.bucket].parameters) {
      if (!flat.taken[p]) take_gradient(flat, p);
    }
    launch_ready_buckets(in_backward);
  }
}

void ShardedOptimizer::end_of_backward() {
  // Every bucket is launched before backward returns, on every rank, even
  // where a parameter got no gradient here: a collective the caller makes
  // between backward and step() then meets the same collectives everywhere.
  backward_open_ = false;
  if (reduced_) return;
  torch::NoGradGuard no_grad;
  try {
    launch_remaining(/*in_backward=*/true);
  } catch (...) {
    abandon_reduction();
    throw;
  }
}

void ShardedOptimizer::finish_reduction() {
  launch_remaining(/*in_backward=*/false);
  while (!in_flight_.empty()) wait_oldest();
  while (!replicating_.empty()) wait_replica_oldest();
  for (FlatGroup& flat : groups_) {
    for (std::size_t p = 0; p < flat.parameters.size(); ++p) {
      // Parameters in no bucket (no elements) still lose their gradient.
      if (!flat.taken[p]) flat.parameters[p].mutable_grad() = at::Tensor();
      flat.taken[p] = false;
    }
    for (auto& bucket : flat.buckets) bucket.pending = bucket.parameters.size();
  }
  next_launch_ = 0;
  backward_open_ = false;  // a backward that threw never ran its end-of-backward callback
}

void ShardedOptimizer::abandon_reduction() noexcept {
  // After a failed collective the step cannot complete; start the next clean.
  for (FlatGroup& flat : groups_) {
    for (auto& bucket : flat.buckets) {
      bucket.work.reset();
      bucket.input = at::Tensor();
      bucket.output = at::Tensor();
      bucket.pending = bucket.parameters.size();
    }
    std::fill(flat.taken.begin(), flat.taken.end(), false);
  }
  in_flight_.clear();
  replicating_.clear();
  next_launch_ = 0;
  backward_open_ = false;
}

void ShardedOptimizer::alias_parameter(FlatGroup& flat, std::size_t p) {
  at::Tensor& parameter = flat.parameters[p];
  flat.buffer.narrow(0, flat.offsets[p], parameter.numel()).copy_(parameter.detach().reshape({-1}));
  parameter.set_data(alias_of(flat.buffer, flat.offsets[p], parameter.sizes()));
}

void ShardedOptimizer::keep_parameters_aliased(FlatGroup& flat) {
  // A parameter whose data was replaced (set_data, a load that assigns) is
  // copied back into the buffer and aliased again, so the step sees it.
  const auto element_size = static_cast<std::int64_t>(flat.buffer.element_size());
  const auto* base = static_cast<const char*>(flat.buffer.data_ptr());
  for (std::size_t p = 0; p < flat.parameters.size(); ++p) {
    const at::Tensor& parameter = flat.parameters[p];
    if (parameter.numel() != flat.offsets[p + 1] - flat.offsets[p]) {
      sharding_error("parameter " + std::to_string(p) + " changed size after sharding (now " +
                     std::to_string(parameter.numel()) + " elements, was " +
                     std::to_string(flat.offsets[p + 1] - flat.offsets[p]) +
                     "). Resize the model before building the ShardedOptimizer (before Accelerator::prepare).");
    }
    if (parameter.data_ptr() != base + flat.offsets[p] * element_size || !parameter.is_contiguous() ||
        parameter.scalar_type() != flat.buffer.scalar_type() || parameter.device() != flat.buffer.device()) {
      if (parameter.scalar_type() != flat.buffer.scalar_type() || parameter.device() != flat.buffer.device()) {
        sharding_error("parameter " + std::to_string(p) + " changed dtype or device after sharding (now " +
                       std::string(c10::toString(parameter.scalar_type())) + " on " + parameter.device().str() +
                       "). Move or cast the model before building the ShardedOptimizer (before Accelerator::prepare).");
      }
      alias_parameter(flat, p);
    }
  }
}

void ShardedOptimizer::link_shard_grad(FlatGroup& flat) {
  if (!flat.shard_grad.defined()) flat.shard_grad = at::zeros({flat.shard_elements}, flat.buffer.options());
  for (std::size_t b = 0; b < flat.buckets.size(); ++b) {
    at::Tensor& grad = flat.slices[b].mutable_grad();
    const auto* expected = static_cast<const char*>(flat.shard_grad.data_ptr()) +
                           flat.buckets[b].shard_offset * static_cast<std::int64_t>(flat.shard_grad.element_size());
    if (!grad.defined() || grad.data_ptr() != expected) {
      grad = alias_of(flat.shard_grad, flat.buckets[b].shard_offset, {flat.buckets[b].slice});
    }
  }
}

checkpoint::ShardLayout ShardedOptimizer::shard_layout() const {
  checkpoint::ShardLayout layout;
  layout.world_size = group_.size();
  if (ProcessGroup* const replicas = replicas_of(options_)) {
    layout.replicas = replicas->size();
    layout.replica = replicas->rank();
  }
  for (const FlatGroup& flat : groups_) {
    checkpoint::ShardLayout::Group group;
    group.parameters = flat.parameters;
    for (const FlatGroup::Bucket& bucket : flat.buckets) {
      const auto [begin, end] = flat.owned(bucket, group_.rank());
      const std::size_t b = static_cast<std::size_t>(&bucket - flat.buckets.data());
      flat.for_each_piece(begin, end, [&](std::size_t p, std::int64_t in_param, std::int64_t at, std::int64_t n) {
        group.pieces.push_back({p, in_param, n, b, at - begin});
      });
    }
    layout.groups.push_back(std::move(group));
  }
  return layout;
}

void ShardedOptimizer::gradients_into_shard(FlatGroup& flat) {
  // Stage 1: the gradients are averaged already; copy this rank's pieces.
  const int rank = group_.rank();
  link_shard_grad(flat);
  at::Tensor& shard_grad = flat.shard_grad;
  for (const auto& bucket : flat.buckets) {
    at::Tensor target = shard_grad.narrow(0, bucket.shard_offset, bucket.slice);
    target.zero_();
    const auto [begin, end] = flat.owned(bucket, rank);
    flat.for_each_piece(begin, end, [&](std::size_t p, std::int64_t in_param, std::int64_t at, std::int64_t n) {
      const at::Tensor& grad = flat.parameters[p].grad();
      if (grad.defined()) target.narrow(0, at - begin, n).copy_(grad.reshape({-1}).narrow(0, in_param, n));
    });
  }
}

void ShardedOptimizer::gather_parameters(FlatGroup& flat) {
  // Each rank's stepped slice, gathered into the bucket's range of the
  // buffer: the parameters themselves. The own slice is copied first, since
  // the collective's input may not alias its output.
  const int size = group_.size();
  for (std::size_t b = 0; b < flat.buckets.size(); ++b) {
    const auto& bucket = flat.buckets[b];
    if (size == 1) break;  // the slice is the bucket
    const at::Tensor mine = flat.slices[b].clone();
    at::Tensor target = flat.buffer.narrow(0, bucket.begin, bucket.slice * size);
    group_.all_gather_async(target, mine)->wait();
  }
}

void ShardedOptimizer::step() {
  ACCELERATE_PROFILE_RANGE("accelerate::ShardedOptimizer::step");
  torch::NoGradGuard no_grad;
  for (FlatGroup& flat : groups_) keep_parameters_aliased(flat);
  reduce_gradients();
  optimizer_.step();
  reduced_ = false;
  for (FlatGroup& flat : groups_) gather_parameters(flat);
}

void ShardedOptimizer::reduce_gradients() {
  if (reduced_) return;
  torch::NoGradGuard no_grad;
  if (options_.stage == ZeroStage::OptimizerState) {
    for (FlatGroup& flat : groups_) gradients_into_shard(flat);
  } else {
    try {
      finish_reduction();
    } catch (...) {
      abandon_reduction();
      throw;
    }
  }
  reduced_ = true;
}

double ShardedOptimizer::clip_grad_norm_(double max_norm, double norm_type) {
  reduce_gradients();
  // Padding holds zero gradients, so it adds nothing to either norm.
  std::vector<at::Tensor> grads;
  for (const FlatGroup& flat : groups_) grads.push_back(flat.shard_grad);
  return training_detail::clip_norm_of_shards(grads, group_, max_norm, norm_type);
}

void ShardedOptimizer::clip_grad_value_(double clip_value) {
  reduce_gradients();
  torch::NoGradGuard no_grad;
  for (FlatGroup& flat : groups_) {
    if (flat.shard_grad.defined()) flat.shard_grad.clamp_(-clip_value, clip_value);
  }
}

void ShardedOptimizer::zero_grad(bool set_to_none) {
  // Gradients dropped between backward and step() (a skipped batch, a failed
  // backward): what was taken or is in flight goes too.
  abandon_reduction();
  reduced_ = false;
  for (FlatGroup& flat : groups_) {
    if (set_to_none) {
      flat.shard_grad = at::Tensor();
      for (at::Tensor& slice : flat.slices) slice.mutable_grad() = at::Tensor();
    } else if (flat.shard_grad.defined()) {
      flat.shard_grad.zero_();
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

std::int64_t ShardedOptimizer::bucket_input_bytes() const noexcept {
  std::int64_t bytes = 0;
  for (const FlatGroup& flat : groups_) {
    for (const auto& bucket : flat.buckets) {
      if (bucket.input.defined()) bytes += static_cast<std::int64_t>(bucket.input.nbytes());
    }
  }
  return bytes;
}

std::int64_t ShardedOptimizer::total_elements() const noexcept {
  std::int64_t total = 0;
  for (const FlatGroup& flat : groups_) total += flat.total();
  return total;
}

std::int64_t ShardedOptimizer::shard_elements() const noexcept {
  std::int64_t total = 0;
  for (const FlatGroup& flat : groups_) total += flat.shard_elements;
  return total;
}

}  // namespace accelerate
