#include "training/gradient_reducer.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <utility>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "detail/profile_range.hpp"
#include "training/gradient_bucket_plan.hpp"
#include "training/gradient_ready_hook.hpp"
#include "training/gradient_use_check.hpp"

namespace accelerate::detail {
namespace {

using training_detail::AccumulatorPtr;
using training_detail::GradientReadyHook;

}  // namespace

struct GradientReducer::Hooks {
  std::vector<AccumulatorPtr> accumulators;
  std::vector<uintptr_t> keys;
};

GradientReducer::GradientReducer(std::vector<at::Tensor> parameters, std::vector<std::string> names,
                                 ProcessGroup& group, GradientReducerConfig config)
    : names_(std::move(names)),
      group_(group),
      group_watch_(group.lifetime().watch()),
      config_(config),
      scale_(1.0 / group.size()),
      owner_(std::this_thread::get_id()),
      hooks_(std::make_unique<Hooks>()) {
  std::vector<GradientSlotInfo> infos;
  infos.reserve(parameters.size());
  for (const auto& p : parameters) infos.push_back({p.scalar_type(), p.device(), p.numel()});
  const auto plan = plan_gradient_buckets(infos, config_.first_cap_bytes, config_.cap_bytes);

  slots_.resize(parameters.size());
  buckets_.resize(plan.size());
  for (std::size_t b = 0; b < plan.size(); ++b) {
    Bucket& bucket = buckets_[b];
    bucket.slots = plan[b];
    int64_t elements = 0;
    for (auto k : bucket.slots) elements += parameters[k].numel();
    const auto& first = parameters[bucket.slots.front()];
    // CPU buckets that are all-reduced as they are live where the group
    // reduces them fastest (for a large bucket, in the node's shared memory,
    // read by the other ranks where backward wrote); not those that travel
    // as a 16-bit copy. Every rank decides alike: the same plan and
    // configuration.
    const auto options = first.options().requires_grad(false);
    const bool shared = first.is_cpu() && !config_.wire_dtype;
    bucket.flat = shared ? group.all_reduce_buffer(elements, options) : at::zeros({elements}, options);
    bucket.wire =
        config_.wire_dtype ? at::empty({elements}, bucket.flat.options().dtype(*config_.wire_dtype)) : bucket.flat;
    bucket.pending = bucket.slots.size();
    bucket.counters.parameters = bucket.slots;
    bucket.counters.bytes = elements * static_cast<int64_t>(bucket.flat.element_size());
    int64_t offset = 0;
    for (auto k : bucket.slots) {
      Slot& slot = slots_[k];
      slot.parameter = parameters[k];
      slot.bucket = b;
      // An alias of the bucket's storage that autograd does not track as a
      // view: optimizers may detach_() a .grad in place (LibTorch 1.13's
      // zero_grad does), which autograd refuses on views.
      slot.view = at::empty({0}, bucket.flat.options());
      std::vector<int64_t> strides(static_cast<std::size_t>(parameters[k].dim()), 1);
      for (int64_t d = parameters[k].dim() - 2; d >= 0; --d) {
        strides[static_cast<std::size_t>(d)] = strides[static_cast<std::size_t>(d) + 1] * parameters[k].size(d + 1);
      }
      slot.view.set_(bucket.flat.storage(), offset, parameters[k].sizes(), strides);
      offset += parameters[k].numel();
    }
  }

  if (config_.power_sgd && group.size() > 1) {
    std::vector<at::Tensor> flats;
    std::vector<std::vector<at::Tensor>> views;
    for (const auto& bucket : buckets_) {
      flats.push_back(bucket.flat);
      views.emplace_back();
      for (auto k : bucket.slots) views.back().push_back(slots_[k].view);
    }
    compressor_ =
        std::make_unique<PowerSgdCompressor>(*config_.power_sgd, flats, views, config_.wire_dtype, group.size());
  }

  for (std::size_t k = 0; k < slots_.size(); ++k) {
    auto accumulator = torch::autograd::impl::grad_accumulator(slots_[k].parameter);
    if (!accumulator) {
      throw ConfigError("DistributedModel: parameter '" + names_[k] +
                        "' has no gradient accumulator (is it a view or a non-leaf tensor?). Register "
                        "parameters as leaf tensors with requires_grad.");
    }
    hooks_->keys.push_back(
        accumulator->add_post_hook(std::make_unique<GradientReadyHook>([this, k] { on_gradient_ready(k); })));
    hooks_->accumulators.push_back(std::move(accumulator));
  }
}

GradientReducer::~GradientReducer() {
  for (std::size_t k = 0; k < hooks_->accumulators.size(); ++k) {
    hooks_->accumulators[k]->del_post_hook(hooks_->keys[k]);
  }
  // Dropping in-flight work waits for it (Work's destructor).
}

void GradientReducer::arm() {
  std::lock_guard lock(mutex_);
  if (sync_enabled_) armed_ = true;
}

bool GradientReducer::may_communicate_here(const Bucket& bucket) const {
  // The library runs MPI FUNNELED: CPU buckets are posted only from the thread
  // that built the reducer (the CPU autograd graph runs there). CUDA hooks run
  // on autograd's device thread; NCCL may be called from it, but debug mode's
  // checks go through MPI.
  if (std::this_thread::get_id() == owner_) return true;
  return bucket.flat.is_cuda() && !group_.debug_mode();
}

bool GradientReducer::grad_is_view(const Slot& slot) const {
  const at::Tensor& grad = slot.parameter.grad();
  return grad.defined() && grad.data_ptr() == slot.view.data_ptr() && grad.sizes() == slot.view.sizes() &&
         grad.strides() == slot.view.strides();
}

void GradientReducer::adopt_view(Slot& slot) {
  if (grad_is_view(slot)) return;
  const at::Tensor& grad = slot.parameter.grad();
  if (grad.defined()) {
    slot.view.copy_(grad);
  } else {
    slot.view.zero_();
  }
  slot.parameter.mutable_grad() = slot.view;
}

void GradientReducer::fill_slot(Slot& slot) {
  if (config_.gradient_as_bucket_view) {
    // Scaling happens on the whole bucket at launch.
    if (slot.parameter.grad().defined()) {
      adopt_view(slot);
    } else {
      slot.view.zero_();
    }
    return;
  }
  const at::Tensor& grad = slot.parameter.grad();
  if (!grad.defined()) {
    slot.view.zero_();
  } else if (scale_ == 1.0) {
    slot.view.copy_(grad);
  } else {
    at::mul_out(slot.view, grad, scale_);
  }
}

void GradientReducer::begin_step() {
  group_watch_.check("DistributedModel (gradient all-reduce in backward)");
  in_step_ = true;
  if (config_.finalize_at_backward_end) {
    torch::autograd::Engine::get_default_engine().queue_callback([this] { finalize(); });
  }
}

void GradientReducer::end_local_backward() {
  std::lock_guard lock(mutex_);
  in_local_backward_ = false;
  ++counters_.local_steps;
}

void GradientReducer::on_gradient_ready(std::size_t index) {
  // Before anything is counted or posted: a misused pass leaves the reducer clean.
  if (use_check_ != nullptr) use_check_->on_gradient(group_watch_, names_[index]);
  std::unique_lock lock(mutex_);
  Slot& slot = slots_[index];
  slot.used_local = true;
  if (!sync_enabled_) {
    // Accumulate locally; with bucket views the accumulation lands in the bucket.
    if (config_.gradient_as_bucket_view && slot.parameter.grad().defined()) adopt_view(slot);
    if (!in_local_backward_) {
      in_local_backward_ = true;
      torch::autograd::Engine::get_default_engine().queue_callback([this] { end_local_backward(); });
    }
    return;
  }
  if (!in_step_) begin_step();
  if (slot.ready) {
    throw ConfigError("DistributedModel: parameter '" + names_[index] +
                      "' received a second gradient before the previous one was reduced. Either a second backward "
                      "ran without synchronize_gradients() in between (finalize_at_backward_end is off), or the "
                      "parameter is used in a reentrant backward. Synchronise between backward passes, or run the "
                      "extra passes under no_sync().");
  }
  fill_slot(slot);
  slot.ready = true;
  Bucket& bucket = buckets_[slot.bucket];
  --bucket.pending;
  if (bucket.pending == 0) launch_ready_buckets(/*in_backward=*/true);
  if (config_.progress_in_hooks) progress();
}

void GradientReducer::launch_ready_buckets(bool in_backward) {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& bucket = buckets_[next_launch_];
    if (!may_communicate_here(bucket)) return;  // finalize posts it
    launch(bucket, in_backward);
    ++next_launch_;
  }
}

void GradientReducer::launch(Bucket& bucket, bool in_backward) {
  // Bucket views hold unscaled gradients. An uncompressed bucket is averaged
  // by the all-reduce itself: the shared-memory path and NCCL divide only
  // the part each rank reduces, where scaling first is a pass over the whole
  // bucket on every rank. A compressed one is scaled first, so that a 16-bit
  // wire cannot overflow.
  const bool average_on_wire =
      config_.gradient_as_bucket_view && bucket.wire.is_same(bucket.flat) && !(compressor_ && compressor_->active());
  if (config_.gradient_as_bucket_view && scale_ != 1.0 && !average_on_wire) bucket.flat.mul_(scale_);
  bucket.launched = true;
  ++bucket.counters.launches;
  (in_backward ? bucket.counters.launched_in_backward : bucket.counters.launched_at_finalize) += 1;
  // The counters describe the reduction schedule, the same at any size.
  ++counters_.all_reduces;
  // One rank: the sum is the bucket itself. Skipping the collective (and the
  // compressed copy) keeps a single-GPU step free of extra kernels and of the
  // rounding a 16-bit wire or a low-rank approximation would add.
  if (compressor_ && compressor_->active()) {
    ACCELERATE_PROFILE_RANGE("accelerate::power_sgd_start");
    bucket.compressed = true;
    counters_.bytes_all_reduced += compressor_->start(static_cast<std::size_t>(&bucket - buckets_.data()), group_);
    return;
  }
  counters_.bytes_all_reduced += bucket.wire.numel() * static_cast<int64_t>(bucket.wire.element_size());
  if (group_.size() == 1) return;
  ACCELERATE_PROFILE_RANGE("accelerate::bucket_all_reduce");
  if (!bucket.wire.is_same(bucket.flat)) bucket.wire.copy_(bucket.flat);
  AllReduceOptions options;
  options.op = average_on_wire ? ReduceOp::Avg : ReduceOp::Sum;
  bucket.work = group_.all_reduce_async(bucket.wire, options);
}

void GradientReducer::progress() {
  // MPI progresses non-blocking collectives only inside MPI calls: testing
  // the posted ones moves them along between gradient computations.
  for (std::size_t b = 0; b < next_launch_; ++b) {
    Bucket& bucket = buckets_[b];
    if (bucket.work && !may_communicate_here(bucket)) continue;
    if (bucket.work) bucket.work->is_completed();
  }
}

void GradientReducer::finalize() {
  std::lock_guard lock(mutex_);
  finalize_locked();
}

void GradientReducer::finalize_locked() {
  if (!in_step_ && !armed_) return;
  group_watch_.check("DistributedModel::synchronize_gradients");
  ACCELERATE_PROFILE_RANGE("accelerate::synchronize_gradients");
  const auto start = std::chrono::steady_clock::now();

  // Parameters without a gradient in this step still fill their slots, so
  // every rank posts the same all-reduces in the same order.
  for (auto& slot : slots_) {
    if (slot.ready) continue;
    fill_slot(slot);
    slot.ready = true;
    --buckets_[slot.bucket].pending;
  }
  for (; next_launch_ < buckets_.size(); ++next_launch_) launch(buckets_[next_launch_], /*in_backward=*/false);

  // How many ranks used each parameter since the last synchronisation. On
  // one rank the local flags are the answer: no round trip through the
  // device, which would make the host wait for the GPU every step.
  const auto& device = buckets_.front().flat.device();
  const bool distributed = group_.size() > 1;
  at::Tensor used = at::empty({static_cast<int64_t>(slots_.size())}, at::TensorOptions().dtype(at::kInt));
  auto* flags = used.data_ptr<int32_t>();
  for (std::size_t k = 0; k < slots_.size(); ++k) flags[k] = slots_[k].used_local ? 1 : 0;
  if (distributed && !device.is_cpu()) used = used.to(device);
  auto used_work = distributed ? group_.all_reduce_async(used, AllReduceOptions{}) : nullptr;

  for (auto& bucket : buckets_) {
    if (bucket.work && bucket.work->is_completed()) ++bucket.counters.completed_before_wait;
  }
  std::exception_ptr failure;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    try {
      if (bucket.work) bucket.work->wait();
      if (bucket.compressed && !failure) {
        ACCELERATE_PROFILE_RANGE("accelerate::power_sgd_finish");
        compressor_->finish(b, group_);
      }
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
    bucket.work.reset();
  }
  if (compressor_) compressor_->end_step();
  try {
    if (used_work) used_work->wait();
  } catch (...) {
    if (!failure) failure = std::current_exception();
  }
  counters_.finalize_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Reset before anything can throw: the next step starts clean.
  std::vector<bool> compressed(buckets_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    bucket.pending = bucket.slots.size();
    bucket.launched = false;
    compressed[b] = std::exchange(bucket.compressed, false);
  }
  next_launch_ = 0;
  in_step_ = false;
  armed_ = false;
  ++counters_.sync_steps;
  if (failure) {
    for (auto& slot : slots_) slot.ready = slot.used_local = false;
    std::rethrow_exception(failure);
  }

  if (!used.is_cpu()) used = used.cpu();
  flags = used.data_ptr<int32_t>();
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    if (distributed && !compressed[b] && !bucket.wire.is_same(bucket.flat)) bucket.flat.copy_(bucket.wire);
  }
  const int world = group_.size();
  std::vector<std::size_t> missing;
  for (std::size_t k = 0; k < slots_.size(); ++k) {
    Slot& slot = slots_[k];
    slot.ready = false;
    slot.used_local = false;
    if (flags[k] == 0) {
      // Unused everywhere: .grad stays as it was (undefined stays undefined).
      if (!config_.find_unused_parameters) missing.push_back(k);
      continue;
    }
    if (flags[k] < world && !config_.find_unused_parameters) missing.push_back(k);
    at::Tensor& grad = slot.parameter.mutable_grad();
    if (config_.gradient_as_bucket_view) {
      if (!grad_is_view(slot)) grad = slot.view;
    } else if (grad.defined()) {
      grad.copy_(slot.view);
    } else {
      grad = slot.view.clone();
    }
  }
  if (!missing.empty()) {
    std::ostringstream out;
    out << "DistributedModel: " << missing.size() << " parameter(s) received no gradient on some rank in this step:";
    for (std::size_t i = 0; i < missing.size() && i < 10; ++i) {
      out << (i == 0 ? " " : ", ") << "'" << names_[missing[i]] << "' (used on " << flags[missing[i]] << " of " << world
          << " ranks)";
    }
    if (missing.size() > 10) out << ", …";
    out << ". Their gradients were reduced as zeros. If parts of the model are skipped on purpose, construct it with "
           "DistributedDataParallelKwargs{.find_unused_parameters = true}; otherwise make the loss depend on every "
           "trainable parameter (or set requires_grad(false) on the unused ones).";
    throw ConfigError(out.str());
  }
}

std::vector<std::vector<std::size_t>> GradientReducer::assignment() const {
  std::vector<std::vector<std::size_t>> result;
  result.reserve(buckets_.size());
  for (const auto& bucket : buckets_) result.push_back(bucket.slots);
  return result;
}

GradientReducerCounters GradientReducer::counters() const {
  std::lock_guard lock(mutex_);
  GradientReducerCounters result = counters_;
  result.buckets.clear();
  for (const auto& bucket : buckets_) result.buckets.push_back(bucket.counters);
  return result;
}

void GradientReducer::reset_counters() {
  std::lock_guard lock(mutex_);
  counters_ = {};
  for (auto& bucket : buckets_) {
    auto parameters = std::move(bucket.counters.parameters);
    const auto bytes = bucket.counters.bytes;
    bucket.counters = {};
    bucket.counters.parameters = std::move(parameters);
    bucket.counters.bytes = bytes;
  }
}

}  // namespace accelerate::detail
