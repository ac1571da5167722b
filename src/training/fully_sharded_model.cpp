#include "accelerate/training/fully_sharded_model.hpp"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "accelerate/comm/work.hpp"
#include "accelerate/error.hpp"
#include "detail/profile_range.hpp"
#include "training/gradient_ready_hook.hpp"
#include "training/meta_tensor_check.hpp"
#include "training/replica_groups.hpp"
#include "training/shard_clipping.hpp"

namespace accelerate {

namespace {

[[noreturn]] void full_shard_error(const std::string& what) {
  throw ConfigError(detail::where() + " FullyShardedModel: " + what);
}

AllReduceOptions maximum_over_ranks() {
  AllReduceOptions max;
  max.op = ReduceOp::Max;
  return max;
}

using training_detail::AccumulatorPtr;
using training_detail::GradientReadyHook;

// A contiguous tensor over `base`'s storage from `offset` that autograd does
// not track as a view of `base`: a parameter's data, or a shard.
at::Tensor storage_alias(const at::Tensor& base, std::int64_t offset, at::IntArrayRef sizes) {
  std::vector<std::int64_t> strides(sizes.size(), 1);
  for (std::size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  at::Tensor alias = at::empty({0}, base.options());
  alias.set_(base.storage(), base.storage_offset() + offset, sizes, strides);
  return alias;
}

// The whole parameters of a unit live in one storage that every parameter
// (and every tensor autograd saved from them) shares. Freeing it keeps the
// tensors, shapes and autograd's references; gathering refills the same
// storage, which is how the unit's backward finds its parameters again.
void free_storage(const at::Tensor& whole) {
  c10::StorageImpl* storage = whole.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, whole.device()));
  storage->set_nbytes(std::size_t{0});
}

void allocate_storage(const at::Tensor& whole) {
  c10::StorageImpl* storage = whole.storage().unsafeGetStorageImpl();
  const auto nbytes = static_cast<std::size_t>(whole.numel()) * whole.element_size();
  if (storage->nbytes() == nbytes) return;
  storage->set_data_ptr_noswap(storage->allocator()->allocate(nbytes));
  storage->set_nbytes(nbytes);
}

}  // namespace

struct FullyShardedModel::Unit {
  std::size_t child = 0;                                   // index in the Sequential
  std::string name;                                        // the child's name there ("0", "1", ...)
  std::vector<at::Tensor> parameters;                      // distinct tensors, in order
  std::vector<std::pair<std::string, std::size_t>> names;  // every name (tied ones too) -> parameter
  std::vector<std::int64_t> offsets;                       // flat offset of each parameter; back() = total
  std::int64_t slice = 0;                                  // elements per rank (total padded to N)
  bool trainable = false;
  at::Tensor whole;  // slice × N elements; the parameters view it; no memory while resharded
  at::Tensor shard;  // this rank's slice: a leaf the optimizer steps
  bool gathered = false;
  // This backward:
  std::size_t pending = 0;  // parameters whose gradient has not arrived
  bool visited = false;     // its backward has begun
  bool reduced = false;

  [[nodiscard]] std::int64_t total() const { return offsets.back(); }

  // The run of parameter p that rank `rank`'s shard holds: where it starts in
  // the parameter and in the shard, and how long it is (0: none of it).
  struct Run {
    std::int64_t offset = 0, shard_offset = 0, count = 0;
  };
  [[nodiscard]] Run run_of(std::size_t p, std::int64_t rank) const {
    const std::int64_t begin = rank * slice;
    const std::int64_t from = std::max(begin, offsets[p]);
    const std::int64_t to = std::min(begin + slice, offsets[p + 1]);
    return from < to ? Run{from - offsets[p], from - begin, to - from} : Run{};
  }
};

struct FullyShardedModel::Hooks {
  std::vector<AccumulatorPtr> accumulators;
  std::vector<uintptr_t> keys;
  std::thread::id owner = std::this_thread::get_id();
};

FullyShardedModel::FullyShardedModel(torch::nn::Sequential model, ProcessGroup& group, FullShardOptions options)
    : model_(std::move(model)), group_(group), options_(std::move(options)), hooks_(std::make_unique<Hooks>()) {
  torch::NoGradGuard no_grad;
  const int size = group.size();
  ProcessGroup* const replicas = training_detail::effective_replicas(options_.replicas);
  if (options_.replicas != nullptr) {
    training_detail::require_matching_replicas(group, *options_.replicas,
                                               [](const std::string& reason) { full_shard_error(reason); });
  }
  training_detail::refuse_meta_tensors(training_detail::named_module_tensors(*model_), {&group, replicas},
                                       "FullyShardedModel", "sharding the model");
  const auto children = model_->named_children();
  std::map<const c10::TensorImpl*, std::size_t> unit_of;  // a parameter belongs to one unit only
  for (std::size_t c = 0; c < children.size(); ++c) {
    const auto& child = children[c];
    Unit unit;
    unit.child = c;
    unit.name = child.key();
    unit.offsets.push_back(0);
    for (const auto& named : child.value()->named_parameters(/*recurse=*/true)) {
      const at::Tensor& p = named.value();
      const auto [known, added] = unit_of.emplace(p.unsafeGetTensorImpl(), units_.size());
      if (!added && known->second != units_.size()) {
        full_shard_error("parameter " + unit.name + "." + named.key() + " is also a parameter of unit " +
                         units_[known->second].name +
                         "; a parameter can belong to one unit only. Untie it, or put both users in one child "
                         "of the Sequential.");
      }
      std::size_t index = unit.parameters.size();
      for (std::size_t q = 0; q < unit.parameters.size(); ++q) {
        if (unit.parameters[q].unsafeGetTensorImpl() == p.unsafeGetTensorImpl()) index = q;
      }
      unit.names.emplace_back(unit.name + "." + named.key(), index);
      if (index != unit.parameters.size()) continue;  // tied within the unit: one range
      if (!unit.parameters.empty()) {
        const at::Tensor& first = unit.parameters.front();
        if (p.scalar_type() != first.scalar_type() || p.device() != first.device()) {
          full_shard_error("unit " + unit.name + " mixes dtypes or devices (" + named.key() + " is " +
                           std::string(c10::toString(p.scalar_type())) + " on " + p.device().str() +
                           "); its flat shard needs one of each. Cast or move the whole model before sharding.");
        }
        if (p.requires_grad() != first.requires_grad()) {
          full_shard_error("unit " + unit.name + " mixes trainable and frozen parameters (" + named.key() +
                           "); its one shard is stepped as a whole. Freeze whole children of the Sequential.");
        }
      }
      unit.parameters.push_back(p);
      unit.offsets.push_back(unit.offsets.back() + p.numel());
    }
    if (unit.parameters.empty()) continue;  // runs as it is
    unit.trainable = unit.parameters.front().requires_grad();
    units_.push_back(std::move(unit));
  }
  // Every rank must cut the same shards: compare the units and their sizes.
  auto count = at::tensor({static_cast<std::int64_t>(units_.size()), -static_cast<std::int64_t>(units_.size())});
  group.all_reduce(count, maximum_over_ranks());
  if (replicas != nullptr) replicas->all_reduce(count, maximum_over_ranks());
  bool alike = count[0].item<std::int64_t>() == -count[1].item<std::int64_t>();
  if (alike && !units_.empty()) {
    std::vector<std::int64_t> totals;
    for (const Unit& unit : units_) totals.push_back(unit.total());
    for (const Unit& unit : units_) totals.push_back(-unit.total());
    auto sizes = at::tensor(totals, at::kLong);
    group.all_reduce(sizes, maximum_over_ranks());
    if (replicas != nullptr) replicas->all_reduce(sizes, maximum_over_ranks());
    const auto n = static_cast<std::int64_t>(units_.size());
    alike = at::equal(sizes.narrow(0, 0, n), sizes.narrow(0, n, n).neg());
  }
  if (!alike) {
    full_shard_error("this rank's model has " + std::to_string(units_.size()) +
                     " units with parameters, or units of other sizes, than another rank's. Every rank must "
                     "shard the same model.");
  }
  for (const auto& buffer : model_->buffers()) {
    at::Tensor values = buffer;
    group.broadcast(values);  // rank 0's buffers everywhere, as DistributedModel does
    if (replicas != nullptr) replicas->broadcast(values);
  }
  for (Unit& unit : units_) {
    // Rank 0's values everywhere, then this rank's slice of them kept and
    // the rest freed, parameter by parameter into the unit's flat space.
    unit.slice = (unit.total() + size - 1) / size;
    const at::TensorOptions like = unit.parameters.front().options();
    unit.whole = at::empty({unit.slice * size}, like);
    unit.whole.narrow(0, unit.total(), unit.whole.numel() - unit.total()).zero_();  // padding
    for (std::size_t p = 0; p < unit.parameters.size(); ++p) {
      at::Tensor& parameter = unit.parameters[p];
      at::Tensor values = parameter.detach();
      group.broadcast(values);
      if (replicas != nullptr) replicas->broadcast(values);  // the first copy's rank 0 everywhere
      unit.whole.narrow(0, unit.offsets[p], parameter.numel()).copy_(values.reshape({-1}));
      parameter.set_data(storage_alias(unit.whole, unit.offsets[p], parameter.sizes()));
    }
    if (size == 1) {
      // One rank: the shard is the whole, and nothing is ever freed.
      unit.shard = storage_alias(unit.whole, 0, {unit.slice});
      unit.gathered = true;
    } else {
      unit.shard = unit.whole.narrow(0, group.rank() * unit.slice, unit.slice).clone();
      unit.gathered = true;
      reshard(unit);
    }
    unit.shard.set_requires_grad(unit.trainable);
    unit.pending = unit.parameters.size();
  }
  unit_of_child_.assign(children.size(), kNoUnit);
  for (std::size_t u = 0; u < units_.size(); ++u) unit_of_child_[units_[u].child] = u;
  // The reduce-scatters' one order on every rank: the last unit first, as
  // backward reaches it first.
  for (std::size_t u = units_.size(); u-- > 0;) {
    if (units_[u].trainable) launch_order_.push_back(u);
  }
  for (std::size_t u = 0; u < units_.size(); ++u) {
    for (std::size_t p = 0; p < units_[u].parameters.size() && units_[u].trainable; ++p) {
      auto accumulator = torch::autograd::impl::grad_accumulator(units_[u].parameters[p]);
      if (!accumulator) continue;
      hooks_->keys.push_back(
          accumulator->add_post_hook(std::make_unique<GradientReadyHook>([this, u, p] { on_gradient_ready(u, p); })));
      hooks_->accumulators.push_back(std::move(accumulator));
    }
  }
}

FullyShardedModel::~FullyShardedModel() {
  for (std::size_t k = 0; k < hooks_->accumulators.size(); ++k) {
    hooks_->accumulators[k]->del_post_hook(hooks_->keys[k]);
  }
}

at::Tensor FullyShardedModel::forward(const at::Tensor& input) {
  ACCELERATE_PROFILE_RANGE("accelerate::FullyShardedModel::forward");
  // A backward that threw never ran its end-of-backward callback.
  reset_backward();
  at::Tensor x = input;
  std::size_t c = 0;
  for (auto& child : *model_) {
    const std::size_t u = unit_of_child_[c++];
    if (u == kNoUnit) {
      x = child.forward(x);
      continue;
    }
    Unit& unit = units_[u];
    gather(unit);
    const at::Tensor input_of_unit = x;
    try {
      x = child.forward(x);
    } catch (...) {
      reshard(unit);
      throw;
    }
    reshard(unit);
    // A hook on the unit's output runs when its gradient is about to enter
    // the unit's last node: the moment to gather the unit for its backward.
    if (torch::GradMode::is_enabled() && x.requires_grad()) {
      // A unit that passed its input through (on this rank only, perhaps)
      // gets a node of its own, so that its hook still runs after the later
      // units' and before the earlier ones', as on the other ranks.
      if (x.is_same(input_of_unit) || (x.grad_fn() && x.grad_fn() == input_of_unit.grad_fn())) x = x.view_as(x);
      x.register_hook([this, u](const at::Tensor& /*grad*/) { before_unit_backward(u); });
    }
  }
  return x;
}

void FullyShardedModel::gather(Unit& unit) {
  if (unit.gathered) return;
  ACCELERATE_PROFILE_RANGE("accelerate::FullyShardedModel::all_gather");
  // MPI is used FUNNELED: collectives from the thread that built the model,
  // which runs the CPU autograd graph; CUDA units may gather on autograd's
  // device thread through NCCL (not in debug mode, whose checks use MPI).
  if (std::this_thread::get_id() != hooks_->owner && (!unit.whole.is_cuda() || group_.debug_mode())) {
    full_shard_error("unit " + unit.name +
                     " must be gathered on a thread other than the one that built the model; MPI collectives "
                     "are posted from that thread only. Run forward and backward there.");
  }
  allocate_storage(unit.whole);
  group_.all_gather_async(unit.whole, unit.shard.detach())->wait();
  unit.gathered = true;
}

void FullyShardedModel::reshard(Unit& unit) noexcept {
  if (group_.size() == 1 || !unit.gathered || full_ > 0) return;
  free_storage(unit.whole);
  unit.gathered = false;
}

void FullyShardedModel::before_unit_backward(std::size_t u) {
  torch::NoGradGuard no_grad;
  Unit& unit = units_.at(u);
  if (unit.visited) {
    full_shard_error("the backward of unit " + unit.name +
                     " began twice in one backward pass: the loss depends on two forward passes. Run one "
                     "forward per backward (sum the losses of micro-batches by accumulating instead: a backward "
                     "per forward with sync_in_backward answering false).");
  }
  unit.visited = true;
  if (!backward_open_) {
    backward_open_ = true;
    torch::autograd::Engine::get_default_engine().queue_callback([this] { end_of_backward(); });
  }
  // The units after this one are done with: autograd runs the nodes created
  // later (theirs) first. One with a parameter that got no gradient is reduced
  // now, in the one order, so that every rank's collectives still match.
  while (next_launch_ < launch_order_.size() && launch_order_[next_launch_] > u) {
    reduce(units_[launch_order_[next_launch_++]]);
  }
  for (std::size_t later = u + 1; later < units_.size(); ++later) {
    if (!units_[later].trainable) reshard(units_[later]);  // frozen units passed their gradient on
  }
  gather(unit);
}

void FullyShardedModel::on_gradient_ready(std::size_t u, std::size_t /*p*/) {
  Unit& unit = units_[u];
  if (unit.reduced) {
    // Backward ran an earlier unit's node before this gradient arrived (units
    // on several devices, or nodes made on other threads): it would sit on
    // the whole parameter and leak into the next step.
    full_shard_error("a gradient of unit " + unit.name +
                     " arrived after the unit's gradients were reduce-scattered. Units must run in order, on one "
                     "device, with every node of a unit created by its forward.");
  }
  if (unit.pending > 0) --unit.pending;
  torch::NoGradGuard no_grad;
  launch_ready();
}

void FullyShardedModel::launch_ready() {
  while (next_launch_ < launch_order_.size() && units_[launch_order_[next_launch_]].pending == 0) {
    reduce(units_[launch_order_[next_launch_++]]);
  }
}

void FullyShardedModel::reduce(Unit& unit) {
  unit.reduced = true;
  if (options_.sync_in_backward && !options_.sync_in_backward()) {
    reshard(unit);  // a micro-step: the whole gradients stay on the parameters
    return;
  }
  ACCELERATE_PROFILE_RANGE("accelerate::FullyShardedModel::reduce_scatter");
  const int size = group_.size();
  at::Tensor input = at::zeros({unit.slice * size}, unit.shard.options().requires_grad(false));
  for (std::size_t p = 0; p < unit.parameters.size(); ++p) {
    at::Tensor& grad = unit.parameters[p].mutable_grad();
    if (grad.defined()) input.narrow(0, unit.offsets[p], grad.numel()).copy_(grad.reshape({-1}));
    grad = at::Tensor();  // the input holds it now
  }
  at::Tensor output = input;
  if (size > 1) {
    output = at::empty({unit.slice}, input.options());
    ReduceScatterOptions average;
    average.op = ReduceOp::Avg;
    group_.reduce_scatter_async(output, input, average)->wait();
  }
  if (ProcessGroup* const replicas = training_detail::effective_replicas(options_.replicas)) {
    // The group's average, averaged over the copies (all of one size): every
    // rank's average. In the one order of the reduce-scatters, on every rank.
    AllReduceOptions average;
    average.op = ReduceOp::Avg;
    replicas->all_reduce(output, average);
  }
  at::Tensor& grad = unit.shard.mutable_grad();
  if (grad.defined()) {
    grad.add_(output);
  } else {
    grad = output;
  }
  reshard(unit);
}

void FullyShardedModel::end_of_backward() {
  backward_open_ = false;
  torch::NoGradGuard no_grad;
  // Units whose backward never ran, or with a parameter that got no
  // gradient: reduced now, in the one order, before backward returns.
  while (next_launch_ < launch_order_.size()) reduce(units_[launch_order_[next_launch_++]]);
  reset_backward();
}

void FullyShardedModel::reset_backward() noexcept {
  for (Unit& unit : units_) {
    reshard(unit);
    unit.pending = unit.parameters.size();
    unit.visited = false;
    unit.reduced = false;
  }
  next_launch_ = 0;
  backward_open_ = false;
}

std::vector<at::Tensor> FullyShardedModel::parameters() const {
  std::vector<at::Tensor> shards;
  shards.reserve(units_.size());
  for (const Unit& unit : units_) shards.push_back(unit.shard);
  return shards;
}

void FullyShardedModel::shard_optimizer(torch::optim::Optimizer& optimizer) const {
  if (dynamic_cast<torch::optim::LBFGS*>(&optimizer) != nullptr) {
    full_shard_error(
        "LBFGS couples every element of its parameters (line search, history), so it cannot step a shard. "
        "Use an element-wise optimizer (SGD, Adam, AdamW, RMSprop, Adagrad), or do not shard.");
  }
  if (!optimizer.state().empty()) {
    full_shard_error(
        "the optimizer has already stepped (it holds state for the whole parameters). Shard it "
        "before its first step.");
  }
  // A model parameter, or a shard (an optimizer built over parameters()), names its unit.
  std::map<const c10::TensorImpl*, std::size_t> unit_of;
  for (std::size_t u = 0; u < units_.size(); ++u) {
    for (const at::Tensor& p : units_[u].parameters) unit_of.emplace(p.unsafeGetTensorImpl(), u);
    unit_of.emplace(units_[u].shard.unsafeGetTensorImpl(), u);
  }
  std::vector<std::size_t> group_of(units_.size(), std::numeric_limits<std::size_t>::max());
  std::vector<std::set<const c10::TensorImpl*>> listed(units_.size());  // the unit's tensors the optimizer holds
  std::vector<std::vector<at::Tensor>> shards(optimizer.param_groups().size());
  for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    for (const at::Tensor& p : optimizer.param_groups()[g].params()) {
      const auto found = unit_of.find(p.unsafeGetTensorImpl());
      if (found == unit_of.end()) {
        full_shard_error("param group " + std::to_string(g) +
                         " holds a tensor that is not a parameter of the sharded model. Build the optimizer "
                         "over the model's parameters, or over FullyShardedModel::parameters().");
      }
      const std::size_t u = found->second;
      const Unit& unit = units_[u];
      if (!unit.trainable) {
        full_shard_error("param group " + std::to_string(g) + " holds the frozen unit " + unit.name +
                         ", whose shard gets no gradient and no optimizer state. Build the optimizer over the "
                         "trainable parameters only.");
      }
      listed[u].insert(p.unsafeGetTensorImpl());
      if (group_of[u] == g) continue;
      if (group_of[u] != std::numeric_limits<std::size_t>::max()) {
        full_shard_error("the parameters of unit " + unit.name + " are in param groups " + std::to_string(group_of[u]) +
                         " and " + std::to_string(g) +
                         "; a unit has one shard, stepped by one group. Put a unit's parameters in one group.");
      }
      group_of[u] = g;
      shards[g].push_back(unit.shard);
    }
  }
  // The shard steps the whole unit: an optimizer that lists only some of its
  // parameters would train the others too.
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const Unit& unit = units_[u];
    if (group_of[u] == std::numeric_limits<std::size_t>::max() ||
        listed[u].count(unit.shard.unsafeGetTensorImpl()) != 0) {
      continue;
    }
    for (const auto& [name, p] : unit.names) {
      if (listed[u].count(unit.parameters[p].unsafeGetTensorImpl()) == 0) {
        full_shard_error("the optimizer holds some parameters of unit " + unit.name + " but not " + name +
                         "; the unit's one shard would step it too. Give the optimizer all of a unit's "
                         "parameters, or none (freeze the unit).");
      }
    }
  }
  for (std::size_t g = 0; g < shards.size(); ++g) optimizer.param_groups()[g].params() = shards[g];
}

void FullyShardedModel::zero_grad(bool set_to_none) {
  for (Unit& unit : units_) {
    at::Tensor& grad = unit.shard.mutable_grad();
    if (set_to_none) {
      grad = at::Tensor();
    } else if (grad.defined()) {
      grad.detach_().zero_();
    }
    for (at::Tensor& p : unit.parameters) p.mutable_grad() = at::Tensor();
  }
  reset_backward();
}

double FullyShardedModel::clip_grad_norm_(double max_norm, double norm_type) {
  std::vector<at::Tensor> grads;
  for (const Unit& unit : units_) grads.push_back(unit.shard.grad());
  return training_detail::clip_norm_of_shards(grads, group_, max_norm, norm_type);
}

void FullyShardedModel::clip_grad_value_(double clip_value) {
  torch::NoGradGuard no_grad;
  for (Unit& unit : units_) {
    if (unit.shard.grad().defined()) unit.shard.mutable_grad().clamp_(-clip_value, clip_value);
  }
}

torch::OrderedDict<std::string, at::Tensor> FullyShardedModel::full_state_dict() {
  torch::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> gathered;
  for (Unit& unit : units_) {
    gather(unit);
    for (const auto& [name, p] : unit.names) gathered[name] = unit.parameters[p].detach().clone();
    reshard(unit);
  }
  torch::OrderedDict<std::string, at::Tensor> state;
  for (const auto& named : model_->named_parameters(/*recurse=*/true)) {
    state.insert(named.key(), gathered.at(named.key()));
  }
  for (const auto& named : model_->named_buffers(/*recurse=*/true)) {
    state.insert(named.key(), named.value().detach().clone());
  }
  return state;
}

void FullyShardedModel::load_full_state_dict(const torch::OrderedDict<std::string, at::Tensor>& state) {
  torch::NoGradGuard no_grad;
  const auto value_of = [&](const std::string& name, at::IntArrayRef sizes) -> const at::Tensor& {
    const at::Tensor* value = state.find(name);
    if (value == nullptr) {
      full_shard_error("the state has no tensor " + name + "; every parameter and buffer must be there.");
    }
    if (value->sizes() != sizes) {
      full_shard_error("the state's " + name + " has shape " + c10::str(value->sizes()) + ", the model's " +
                       c10::str(sizes) + ".");
    }
    return *value;
  };
  // Every name and shape first, so that a refused state changes nothing.
  for (const Unit& unit : units_) {
    for (const auto& [name, p] : unit.names) (void)value_of(name, unit.parameters[p].sizes());
  }
  for (const auto& named : model_->named_buffers(/*recurse=*/true)) (void)value_of(named.key(), named.value().sizes());
  const std::int64_t rank = group_.rank();
  for (Unit& unit : units_) {
    const std::int64_t begin = rank * unit.slice;
    const std::int64_t end = begin + unit.slice;
    std::vector<bool> done(unit.parameters.size(), false);
    for (const auto& [name, p] : unit.names) {
      if (done[p]) continue;
      done[p] = true;
      const at::Tensor values = value_of(name, unit.parameters[p].sizes()).reshape({-1});
      const std::int64_t from = std::max(begin, unit.offsets[p]);
      const std::int64_t to = std::min(end, unit.offsets[p + 1]);
      if (from >= to) continue;
      unit.shard.detach().narrow(0, from - begin, to - from).copy_(values.narrow(0, from - unit.offsets[p], to - from));
    }
  }
  for (const auto& named : model_->named_buffers(/*recurse=*/true)) {
    named.value().detach().copy_(value_of(named.key(), named.value().sizes()));
  }
}

void FullyShardedModel::gather_full_parameters() {
  torch::NoGradGuard no_grad;
  for (Unit& unit : units_) gather(unit);
  ++full_;
}

void FullyShardedModel::release_full_parameters(bool write_back) {
  torch::NoGradGuard no_grad;
  if (full_ == 0) return;
  if (--full_ > 0) return;  // an enclosing gather still holds them
  for (Unit& unit : units_) {
    if (write_back && group_.size() > 1 && unit.gathered) {
      unit.shard.detach().copy_(unit.whole.narrow(0, group_.rank() * unit.slice, unit.slice));
    }
    reshard(unit);
  }
}

std::tuple<int, int, int> FullyShardedModel::copies() const {
  ProcessGroup* const replicas = training_detail::effective_replicas(options_.replicas);
  return {group_.size(), replicas != nullptr ? replicas->size() : 1, replicas != nullptr ? replicas->rank() : 0};
}

checkpoint::ShardLayout FullyShardedModel::shard_layout(const torch::optim::Optimizer& optimizer) const {
  std::map<const c10::TensorImpl*, std::size_t> unit_of_shard;
  for (std::size_t u = 0; u < units_.size(); ++u) unit_of_shard.emplace(units_[u].shard.unsafeGetTensorImpl(), u);
  checkpoint::ShardLayout layout;
  std::tie(layout.world_size, layout.replicas, layout.replica) = copies();
  const std::int64_t rank = group_.rank();
  for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    const auto& params = optimizer.param_groups()[g].params();
    checkpoint::ShardLayout::Group group;
    for (std::size_t t = 0; t < params.size(); ++t) {
      const auto found = unit_of_shard.find(params[t].unsafeGetTensorImpl());
      if (found == unit_of_shard.end()) {
        full_shard_error("param group " + std::to_string(g) +
                         " steps a tensor that is not one of this model's shards. Re-point the optimizer with "
                         "shard_optimizer, or build it over FullyShardedModel::parameters().");
      }
      // The shard of unit u stands for the unit's parameters, in order; this
      // rank's runs of them are its part of the flat space.
      const Unit& unit = units_[found->second];
      for (std::size_t p = 0; p < unit.parameters.size(); ++p) {
        const std::size_t index = group.parameters.size();
        group.parameters.push_back(unit.parameters[p]);
        const Unit::Run run = unit.run_of(p, rank);
        if (run.count > 0) group.pieces.push_back({index, run.offset, run.count, t, run.shard_offset});
      }
    }
    layout.groups.push_back(std::move(group));
  }
  return layout;
}

checkpoint::ShardedWeights FullyShardedModel::sharded_weights() const {
  checkpoint::ShardedWeights weights;
  std::tie(weights.world_size, weights.replicas, weights.replica) = copies();
  for (const Unit& unit : units_) {
    const at::Tensor shard = unit.shard.detach();
    for (const auto& [name, p] : unit.names) {  // tied names each, with the same pieces
      const at::Tensor& parameter = unit.parameters[p];
      checkpoint::ShardedWeights::Weight weight{name, parameter.scalar_type(), parameter.sizes().vec(), {}};
      const Unit::Run run = unit.run_of(p, group_.rank());
      if (run.count > 0) weight.pieces.push_back({run.offset, shard.narrow(0, run.shard_offset, run.count)});
      weights.weights.push_back(std::move(weight));
    }
  }
  return weights;
}

std::size_t FullyShardedModel::units() const noexcept { return units_.size(); }

std::int64_t FullyShardedModel::total_elements() const noexcept {
  std::int64_t total = 0;
  for (const Unit& unit : units_) total += unit.total();
  return total;
}

std::int64_t FullyShardedModel::shard_elements() const noexcept {
  std::int64_t total = 0;
  for (const Unit& unit : units_) total += unit.slice;
  return total;
}

std::int64_t FullyShardedModel::whole_parameter_bytes() const noexcept {
  if (group_.size() == 1) return 0;  // the shard is the whole: nothing beyond it
  std::int64_t bytes = 0;
  for (const Unit& unit : units_) bytes += static_cast<std::int64_t>(unit.whole.storage().nbytes());
  return bytes;
}

std::int64_t FullyShardedModel::whole_gradient_bytes() const noexcept {
  std::int64_t bytes = 0;
  for (const Unit& unit : units_) {
    for (const at::Tensor& p : unit.parameters) {
      if (p.grad().defined()) bytes += static_cast<std::int64_t>(p.grad().nbytes());
    }
  }
  return bytes;
}

}  // namespace accelerate
