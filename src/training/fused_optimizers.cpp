#include "accelerate/training/fused_optimizers.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "accelerate/error.hpp"
#include "training/distinct_parameters.hpp"
#include "training/flat_alias.hpp"
#include "training/fused_step_kernels.hpp"

namespace accelerate {

namespace {

namespace optim = torch::optim;
using training_detail::alias_of;
using StateMap = std::remove_reference_t<decltype(std::declval<optim::Optimizer&>().state())>;

// The key of a parameter in Optimizer::state(), as torch::optim makes it: the
// TensorImpl's address printed (LibTorch 1.x) or the address (2.x).
template <class Map = StateMap>
typename Map::key_type state_key(const at::Tensor& parameter) {
  using Key = typename Map::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;
    address << parameter.unsafeGetTensorImpl();
    return address.str();
  } else {
    return static_cast<Key>(parameter.unsafeGetTensorImpl());
  }
}

// Whether `next` starts where `previous` ends, in the same storage, both
// contiguous, of one dtype and device.
bool follows(const at::Tensor& next, const at::Tensor& previous) {
  return next.defined() && previous.defined() && next.is_contiguous() && previous.is_contiguous() &&
         next.scalar_type() == previous.scalar_type() && next.device() == previous.device() &&
         next.storage().unsafeGetStorageImpl() == previous.storage().unsafeGetStorageImpl() &&
         next.storage_offset() == previous.storage_offset() + previous.numel();
}

// One parameter with a gradient, in a step.
struct Entry {
  at::Tensor param;
  at::Tensor grad;
  optim::OptimizerParamState* state = nullptr;
  std::int64_t order = 0;  // runs share it: the step count (Adam), whether momentum started (SGD)
  bool alone = false;      // not steppable in place as part of a run (layout, dtype), see stepped_alone
};

// Where the parameter or its gradient cannot be a range of a run: stepped
// through contiguous temporaries of the parameter's dtype.
bool stepped_alone(const at::Tensor& param, const at::Tensor& grad) {
  return !param.is_contiguous() || !grad.is_contiguous() || grad.scalar_type() != param.scalar_type() ||
         grad.device() != param.device() || grad.sizes() != param.sizes() || param.numel() == 0;
}

// A run: entries whose parameters and gradients lie back to back, with one order.
struct Run {
  std::vector<Entry*> entries;
  std::int64_t numel = 0;
  at::Tensor param;  // 1-D over the run
  at::Tensor grad;
  at::Tensor param_temporary;  // a non-contiguous parameter's contiguous copy, copied back after the step
};

[[noreturn]] void fused_error(const char* who, const std::string& what) {
  throw ConfigError(std::string(who) + ": " + what);
}

// The group's parameters that have a gradient, with their state.
std::vector<Entry> entries_of(const char* who, optim::OptimizerParamGroup& group, StateMap& states) {
  std::vector<Entry> entries;
  entries.reserve(group.params().size());
  for (const at::Tensor& param : group.params()) {
    const at::Tensor& grad = param.grad();
    if (!grad.defined()) continue;
    if (grad.layout() != at::kStrided) fused_error(who, "sparse gradients are not supported.");
    Entry entry;
    entry.param = param;
    entry.grad = grad;
    const auto found = states.find(state_key(param));
    entry.state = found == states.end() ? nullptr : found->second.get();
    entry.alone = stepped_alone(param, grad);
    entries.push_back(std::move(entry));
  }
  return entries;
}

// Cuts the entries (each with its order set) into runs, in address order.
std::vector<Run> runs_of(std::vector<Entry>& entries) {
  std::vector<Entry*> sorted;
  sorted.reserve(entries.size());
  for (Entry& entry : entries) sorted.push_back(&entry);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return reinterpret_cast<std::uintptr_t>(a->param.data_ptr()) <
           reinterpret_cast<std::uintptr_t>(b->param.data_ptr());
  });
  std::vector<Run> runs;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    Entry* entry = sorted[i];
    const Entry* previous = i == 0 ? nullptr : sorted[i - 1];
    const bool joins = previous != nullptr && !entry->alone && !previous->alone && entry->order == previous->order &&
                       follows(entry->param, previous->param) && follows(entry->grad, previous->grad);
    if (!joins) runs.emplace_back();
    runs.back().entries.push_back(entry);
    runs.back().numel += entry->param.numel();
  }
  for (Run& run : runs) {
    const Entry& first = *run.entries.front();
    if (first.alone) {
      if (!first.param.is_contiguous()) run.param_temporary = first.param.contiguous();
      const at::Tensor& param = run.param_temporary.defined() ? run.param_temporary : first.param;
      run.param = alias_of(param, 0, {run.numel});
      run.grad = alias_of(first.grad.to(first.param.scalar_type()).contiguous(), 0, {run.numel});
    } else {
      run.param = alias_of(first.param, 0, {run.numel});
      run.grad = alias_of(first.grad, 0, {run.numel});
    }
  }
  return runs;
}

// Writes the parameter of an entry stepped alone back.
void finish(Run& run) {
  if (run.param_temporary.defined()) run.entries.front()->param.copy_(run.param_temporary);
}

// Makes one state tensor of every entry of the run (`get` names it) a range
// of one flat buffer of the parameters' dtype, and returns the buffer. A run
// whose tensors already lie so keeps them; otherwise (new state: zeros; a
// loaded one: its values) they are gathered into a new buffer.
template <class Get>
at::Tensor flat_state(const Run& run, Get&& get) {
  bool flat = true;
  for (std::size_t k = 0; k < run.entries.size() && flat; ++k) {
    const at::Tensor& tensor = get(*run.entries[k]);
    const at::Tensor& param = run.entries[k]->param;
    flat = tensor.defined() && tensor.is_contiguous() && tensor.sizes() == param.sizes() &&
           tensor.scalar_type() == param.scalar_type() && tensor.device() == param.device() &&
           (k == 0 || follows(tensor, get(*run.entries[k - 1])));
  }
  if (flat) return alias_of(get(*run.entries.front()), 0, {run.numel});
  const at::Tensor buffer = at::zeros({run.numel}, run.param.options());
  std::int64_t offset = 0;
  for (Entry* entry : run.entries) {
    at::Tensor& tensor = get(*entry);
    at::Tensor range = alias_of(buffer, offset, entry->param.sizes());
    if (tensor.defined()) range.copy_(tensor);
    tensor = range;
    offset += entry->param.numel();
  }
  return buffer;
}

template <class State>
State& state_of(Entry& entry) {
  return static_cast<State&>(*entry.state);
}

// Gives every entry of the run without state a new one, step 0.
template <class State>
void create_states(Run& run, StateMap& states) {
  for (Entry* entry : run.entries) {
    if (entry->state != nullptr) continue;
    auto state = std::make_unique<State>();
    entry->state = state.get();
    states[state_key(entry->param)] = std::move(state);
  }
}

// Before a step: parameters pointed away from the flat storage are put back,
// gradients replaced by other tensors are copied back. Parameters moved or
// cast since (a model built on the CPU and moved by Accelerator::prepare) are
// flattened anew where they now are. A group the optimizer's param groups no
// longer match (re-pointed at shards) releases its storage: the shards are
// what is stepped.
void refresh(std::vector<FlatParameters>& flat, const std::vector<optim::OptimizerParamGroup>& groups) {
  for (std::size_t g = 0; g < flat.size(); ++g) {
    if (flat[g].groups().empty()) continue;
    if (g >= groups.size() || !flat[g].built_from(groups[g].params())) {
      flat[g] = FlatParameters();
      continue;
    }
    if (!flat[g].still_fits()) {
      flat[g] = FlatParameters(groups[g].params(), /*link_gradients=*/false);
      continue;
    }
    flat[g].keep_aliased();
    flat[g].link_gradients();
  }
}

void flatten(const char* who, optim::Optimizer& optimizer, std::vector<FlatParameters>& flat) {
  // A tied weight (one tensor under two names) is stepped once.
  training_detail::deduplicate_param_groups(optimizer, who);
  // Gradients are linked as backward makes them (the first step copies them
  // in): a model moved after this (Accelerator::prepare places it) gets them
  // where it now is, and a parameter no backward reaches keeps an undefined
  // gradient and is skipped, as in torch::optim.
  for (const auto& group : optimizer.param_groups()) flat.emplace_back(group.params(), /*link_gradients=*/false);
}

void zero_gradients(std::vector<FlatParameters>& flat, std::vector<optim::OptimizerParamGroup>& groups,
                    bool set_to_none) {
  torch::NoGradGuard no_grad;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const bool covered =
        g < flat.size() && !flat[g].groups().empty() && flat[g].built_from(groups[g].params()) && flat[g].still_fits();
    if (covered && !set_to_none) {
      flat[g].zero_grad();
      continue;
    }
    for (at::Tensor& param : groups[g].params()) {
      if (!param.grad().defined()) continue;
      if (set_to_none) {
        param.mutable_grad() = at::Tensor();
      } else {
        param.mutable_grad().detach_();
        param.mutable_grad().zero_();
      }
    }
  }
}

template <class State, class Options>
void adam_like_step(const char* who, optim::Optimizer& optimizer, std::vector<FlatParameters>& flat, bool decoupled) {
  torch::NoGradGuard no_grad;
  refresh(flat, optimizer.param_groups());
  StateMap& states = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    const auto& options = static_cast<const Options&>(group.options());
    std::vector<Entry> entries = entries_of(who, group, states);
    for (Entry& entry : entries) entry.order = entry.state == nullptr ? 0 : state_of<State>(entry).step();
    for (Run& run : runs_of(entries)) {
      create_states<State>(run, states);
      const at::Tensor exp_avg = flat_state(run, [](Entry& e) -> at::Tensor& { return state_of<State>(e).exp_avg(); });
      const at::Tensor exp_avg_sq =
          flat_state(run, [](Entry& e) -> at::Tensor& { return state_of<State>(e).exp_avg_sq(); });
      at::Tensor max_exp_avg_sq;
      if (options.amsgrad()) {
        max_exp_avg_sq = flat_state(run, [](Entry& e) -> at::Tensor& { return state_of<State>(e).max_exp_avg_sq(); });
      }
      const std::int64_t step = run.entries.front()->order + 1;
      training_detail::adam_step(run.param, run.grad, exp_avg, exp_avg_sq, max_exp_avg_sq,
                                 training_detail::AdamStep{.lr = options.lr(),
                                                           .beta1 = std::get<0>(options.betas()),
                                                           .beta2 = std::get<1>(options.betas()),
                                                           .eps = options.eps(),
                                                           .weight_decay = options.weight_decay(),
                                                           .amsgrad = options.amsgrad(),
                                                           .decoupled = decoupled,
                                                           .step = step});
      finish(run);
      for (Entry* entry : run.entries) state_of<State>(*entry).step(step);
    }
  }
}

void sgd_step(optim::Optimizer& optimizer, std::vector<FlatParameters>& flat) {
  torch::NoGradGuard no_grad;
  refresh(flat, optimizer.param_groups());
  StateMap& states = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    const auto& options = static_cast<const optim::SGDOptions&>(group.options());
    const bool momentum = options.momentum() != 0;
    std::vector<Entry> entries = entries_of("FusedSGD", group, states);
    for (Entry& entry : entries) {
      entry.order =
          momentum && entry.state != nullptr && state_of<optim::SGDParamState>(entry).momentum_buffer().defined() ? 1
                                                                                                                  : 0;
    }
    for (Run& run : runs_of(entries)) {
      at::Tensor buffer;
      if (momentum) {
        create_states<optim::SGDParamState>(run, states);
        buffer = flat_state(run, [](Entry& e) -> at::Tensor& {
          return state_of<optim::SGDParamState>(e).momentum_buffer();
        });
      }
      training_detail::sgd_step(run.param, run.grad, buffer,
                                training_detail::SgdStep{.lr = options.lr(),
                                                         .momentum = options.momentum(),
                                                         .dampening = options.dampening(),
                                                         .weight_decay = options.weight_decay(),
                                                         .nesterov = options.nesterov(),
                                                         .first = run.entries.front()->order == 0});
      finish(run);
    }
  }
}

at::Tensor evaluate(const optim::Optimizer::LossClosure& closure) {
  if (closure == nullptr) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

}  // namespace

FusedSGD::FusedSGD(std::vector<optim::OptimizerParamGroup> param_groups, optim::SGDOptions defaults)
    : optim::SGD(std::move(param_groups), defaults) {
  flatten("FusedSGD", *this, flat_);
}

FusedSGD::FusedSGD(std::vector<at::Tensor> params, optim::SGDOptions defaults)
    : FusedSGD({optim::OptimizerParamGroup(std::move(params))}, defaults) {}

at::Tensor FusedSGD::step(LossClosure closure) {
  at::Tensor loss = evaluate(closure);
  sgd_step(*this, flat_);
  return loss;
}

void FusedSGD::zero_grad(bool set_to_none) { zero_gradients(flat_, param_groups(), set_to_none); }

FusedAdam::FusedAdam(std::vector<optim::OptimizerParamGroup> param_groups, optim::AdamOptions defaults)
    : optim::Adam(std::move(param_groups), defaults) {
  flatten("FusedAdam", *this, flat_);
}

FusedAdam::FusedAdam(std::vector<at::Tensor> params, optim::AdamOptions defaults)
    : FusedAdam({optim::OptimizerParamGroup(std::move(params))}, defaults) {}

at::Tensor FusedAdam::step(LossClosure closure) {
  at::Tensor loss = evaluate(closure);
  adam_like_step<optim::AdamParamState, optim::AdamOptions>("FusedAdam", *this, flat_, /*decoupled=*/false);
  return loss;
}

void FusedAdam::zero_grad(bool set_to_none) { zero_gradients(flat_, param_groups(), set_to_none); }

FusedAdamW::FusedAdamW(std::vector<optim::OptimizerParamGroup> param_groups, optim::AdamWOptions defaults)
    : optim::AdamW(std::move(param_groups), defaults) {
  flatten("FusedAdamW", *this, flat_);
}

FusedAdamW::FusedAdamW(std::vector<at::Tensor> params, optim::AdamWOptions defaults)
    : FusedAdamW({optim::OptimizerParamGroup(std::move(params))}, defaults) {}

at::Tensor FusedAdamW::step(LossClosure closure) {
  at::Tensor loss = evaluate(closure);
  adam_like_step<optim::AdamWParamState, optim::AdamWOptions>("FusedAdamW", *this, flat_, /*decoupled=*/true);
  return loss;
}

void FusedAdamW::zero_grad(bool set_to_none) { zero_gradients(flat_, param_groups(), set_to_none); }

}  // namespace accelerate
