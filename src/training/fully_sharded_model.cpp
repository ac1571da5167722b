#include "accelerate/training/fully_sharded_model.hpp"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "accelerate/comm/work.hpp"
#include "accelerate/error.hpp"
#include "accelerate/training/sharded_unit_scope.hpp"
#include "detail/profile_range.hpp"
#include "training/flat_alias.hpp"
#include "training/gradient_ready_hook.hpp"
#include "training/meta_tensor_check.hpp"
#include "training/qualified_name.hpp"
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

using training_detail::alias_of;

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

// Which FullyShardedModel's unit a module is, for ShardedUnitScope.
struct UnitHandle {
  FullyShardedModel* model = nullptr;
  std::size_t unit = 0;
};

std::mutex& registry_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::unordered_map<const torch::nn::Module*, UnitHandle>& unit_registry() {
  static std::unordered_map<const torch::nn::Module*, UnitHandle> registry;
  return registry;
}

}  // namespace

struct FullyShardedModel::Unit {
  std::string name;                                        // its module's qualified name ("" for the root)
  const torch::nn::Module* module = nullptr;               // that module (the model for the root)
  std::size_t parent = kNoUnit;                            // the unit around it (kNoUnit: the root's, or the root)
  std::vector<at::Tensor> parameters;                      // distinct tensors, in order
  std::vector<std::pair<std::string, std::size_t>> names;  // every name (tied ones too) -> parameter
  std::vector<std::int64_t> offsets;                       // flat offset of each parameter; back() = total
  std::int64_t slice = 0;                                  // elements per rank (total padded to N)
  bool trainable = false;
  at::Tensor whole;  // slice × N elements; the parameters view it; no memory while resharded
  at::Tensor shard;  // this rank's slice: a leaf the optimizer steps
  bool gathered = false;
  // This forward:
  bool entered = false;        // its forward ran inside its scope
  bool left_unmarked = false;  // its scope ended, with gradients on, without output()
  bool marked = false;         // output() was called in the running scope
  // This backward:
  std::size_t pending = 0;  // parameters whose gradient has not arrived
  bool visited = false;     // its backward has begun
  bool reduced = false;

  [[nodiscard]] std::int64_t total() const { return offsets.back(); }
  [[nodiscard]] std::string display_name() const { return name.empty() ? "<root>" : name; }

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

FullyShardedModel::FullyShardedModel(const torch::nn::Sequential& model, ProcessGroup& group, FullShardOptions options)
    : FullyShardedModel(std::static_pointer_cast<torch::nn::Module>(model.ptr()), group, std::move(options)) {}

FullyShardedModel::FullyShardedModel(std::shared_ptr<torch::nn::Module> model, ProcessGroup& group,
                                     FullShardOptions options)
    : model_(std::move(model)),
      sequential_(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(model_)),
      group_(group),
      options_(std::move(options)),
      hooks_(std::make_unique<Hooks>()) {
  if (!model_) full_shard_error("the model is empty (a null module).");
  torch::NoGradGuard no_grad;
  const int size = group.size();
  ProcessGroup* const replicas = training_detail::effective_replicas(options_.replicas);
  if (options_.replicas != nullptr) {
    training_detail::require_matching_replicas(group, *options_.replicas,
                                               [](const std::string& reason) { full_shard_error(reason); });
  }
  training_detail::refuse_meta_tensors(training_detail::named_module_tensors(*model_), {&group, replicas},
                                       "FullyShardedModel", "sharding the model");
  choose_units(options_.units);
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
      parameter.set_data(alias_of(unit.whole, unit.offsets[p], parameter.sizes()));
    }
    if (size == 1) {
      // One rank: the shard is the whole, and nothing is ever freed.
      unit.shard = alias_of(unit.whole, 0, {unit.slice});
      unit.gathered = true;
    } else {
      unit.shard = unit.whole.narrow(0, group.rank() * unit.slice, unit.slice).clone();
      unit.gathered = true;
      reshard(unit);
    }
    unit.shard.set_requires_grad(unit.trainable);
    unit.pending = unit.parameters.size();
  }
  if (sequential_) {
    // The replay enters the units among the children itself: with no unit
    // deeper down, no forward needs checking.
    checked_ = true;
    unit_of_child_.assign(sequential_->size(), kNoUnit);
    for (std::size_t u = 0; u < units_.size(); ++u) {
      bool child = u == root_;
      for (std::size_t c = 0; c < sequential_->size(); ++c) {
        if (units_[u].module == sequential_->ptr(c).get()) {
          unit_of_child_[c] = u;
          child = true;
        }
      }
      checked_ = checked_ && child;
    }
  }
  const std::lock_guard lock(registry_mutex());
  for (std::size_t u = 0; u < units_.size(); ++u) {
    if (u == root_) continue;
    const auto [known, added] = unit_registry().emplace(units_[u].module, UnitHandle{this, u});
    if (!added) {
      full_shard_error("unit " + units_[u].name +
                       " is already a unit of another FullyShardedModel; a module can be sharded by one only.");
    }
  }
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

void FullyShardedModel::choose_units(const UnitPolicy& policy) {
  // Every module in pre-order, the root first, by its qualified name.
  const auto modules = model_->named_modules("", /*include_self=*/true);
  std::map<std::string, std::size_t> module_named;
  for (std::size_t i = 0; i < modules.size(); ++i) module_named.emplace(modules[i].key(), i);
  std::set<std::string> chosen;
  std::map<const torch::nn::Module*, std::string> chosen_module;
  for (const std::string& name : policy.select(*model_)) {
    const auto found = module_named.find(name);
    if (name.empty() || found == module_named.end()) {
      full_shard_error("the unit policy chose '" + name +
                       "', which is not a submodule of the model (the root is always a unit of its own). Name "
                       "submodules by their qualified names, as named_modules() gives them.");
    }
    const torch::nn::Module* module = modules[found->second].value().get();
    const auto [known, added] = chosen_module.emplace(module, name);
    if (!added && known->second != name) {
      full_shard_error("unit " + name + " is also registered as " + known->second +
                       "; a unit's module may appear once in the model.");
    }
    chosen.insert(name);
  }
  // The candidate units in pre-order, the root first; each module's own
  // parameters are held by the innermost candidate around it.
  struct Candidate {
    std::string name;
    const torch::nn::Module* module;
    std::size_t parent;
  };
  std::vector<Candidate> candidates{{"", model_.get(), kNoUnit}};
  std::vector<std::size_t> holder(modules.size(), 0);
  for (std::size_t i = 1; i < modules.size(); ++i) {
    const std::string& name = modules[i].key();
    const std::size_t dot = name.rfind('.');
    const std::size_t parent = dot == std::string::npos ? 0 : module_named.at(name.substr(0, dot));
    holder[i] = holder[parent];
    if (chosen.count(name) != 0) {
      candidates.push_back({name, modules[i].value().get(), holder[parent]});
      holder[i] = candidates.size() - 1;
    }
  }
  const auto around_both = [&](std::size_t a, std::size_t b) {
    std::set<std::size_t> around_a;
    for (std::size_t c = a; c != kNoUnit; c = candidates[c].parent) around_a.insert(c);
    while (around_a.count(b) == 0) b = candidates[b].parent;
    return b;
  };
  // Each distinct parameter goes to the innermost candidate around every
  // module it is registered in: a weight tied across blocks to the unit
  // around them, a head tied to the embedding to the root.
  struct Owned {
    at::Tensor tensor;
    std::size_t candidate;
    std::vector<std::string> names;
  };
  std::vector<Owned> owned;
  std::map<const c10::TensorImpl*, std::size_t> owned_index;
  for (std::size_t i = 0; i < modules.size(); ++i) {
    for (const auto& named : modules[i].value()->named_parameters(/*recurse=*/false)) {
      const std::string name = detail::qualified_name(modules[i].key(), named.key());
      const auto [known, added] = owned_index.emplace(named.value().unsafeGetTensorImpl(), owned.size());
      if (added) {
        owned.push_back({named.value(), holder[i], {name}});
      } else {
        Owned& first = owned[known->second];
        first.candidate = around_both(first.candidate, holder[i]);
        first.names.push_back(name);
      }
    }
  }
  std::vector<std::size_t> unit_of_candidate(candidates.size(), kNoUnit);
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    Unit unit;
    unit.name = candidates[c].name;
    unit.module = candidates[c].module;
    unit.offsets.push_back(0);
    for (const Owned& o : owned) {
      if (o.candidate != c) continue;
      const at::Tensor& p = o.tensor;
      if (!unit.parameters.empty()) {
        const at::Tensor& first = unit.parameters.front();
        if (p.scalar_type() != first.scalar_type() || p.device() != first.device()) {
          full_shard_error("unit " + unit.display_name() + " mixes dtypes or devices (" + o.names.front() + " is " +
                           std::string(c10::toString(p.scalar_type())) + " on " + p.device().str() +
                           "); its flat shard needs one of each. Cast or move the whole model before sharding.");
        }
        if (p.requires_grad() != first.requires_grad()) {
          full_shard_error("unit " + unit.display_name() + " mixes trainable and frozen parameters (" +
                           o.names.front() +
                           "); its one shard is stepped as a whole. Freeze whole units, or choose units that "
                           "separate the frozen parameters.");
        }
      }
      for (const std::string& name : o.names) unit.names.emplace_back(name, unit.parameters.size());
      unit.parameters.push_back(p);
      unit.offsets.push_back(unit.offsets.back() + p.numel());
    }
    if (unit.parameters.empty()) continue;  // runs as it is
    // The nearest candidate around it that has parameters.
    for (std::size_t around = candidates[c].parent; around != kNoUnit; around = candidates[around].parent) {
      if (unit_of_candidate[around] != kNoUnit) {
        unit.parent = unit_of_candidate[around];
        break;
      }
    }
    unit.trainable = unit.parameters.front().requires_grad();
    unit_of_candidate[c] = units_.size();
    units_.push_back(std::move(unit));
  }
  root_ = unit_of_candidate[0];
}

std::pair<FullyShardedModel*, std::size_t> FullyShardedModel::unit_of(const torch::nn::Module* module) {
  const std::lock_guard lock(registry_mutex());
  const auto found = unit_registry().find(module);
  if (found == unit_registry().end()) return {nullptr, 0};
  return {found->second.model, found->second.unit};
}

bool FullyShardedModel::is_inside(std::size_t inner, std::size_t outer) const {
  for (std::size_t u = units_[inner].parent; u != kNoUnit; u = units_[u].parent) {
    if (u == outer) return true;
  }
  return false;
}

FullyShardedModel::~FullyShardedModel() {
  const std::lock_guard lock(registry_mutex());
  for (auto it = unit_registry().begin(); it != unit_registry().end();) {
    it = it->second.model == this ? unit_registry().erase(it) : std::next(it);
  }
  for (std::size_t k = 0; k < hooks_->accumulators.size(); ++k) {
    hooks_->accumulators[k]->del_post_hook(hooks_->keys[k]);
  }
}

at::Tensor FullyShardedModel::forward(const at::Tensor& input) {
  ACCELERATE_PROFILE_RANGE("accelerate::FullyShardedModel::forward");
  if (!sequential_) {
    full_shard_error("forward(x) replays the children of a torch::nn::Sequential; this model is a " + model_->name() +
                     ". Call its own forward through the prepared model (or between begin_forward() and "
                     "end_forward()), with a ShardedUnitScope in each unit's forward (docs/sharding.md).");
  }
  begin_forward();
  at::Tensor x = input;
  try {
    std::size_t c = 0;
    for (auto& child : *sequential_) {
      const std::size_t u = unit_of_child_[c++];
      if (u == kNoUnit) {
        x = child.forward(x);
        continue;
      }
      enter_unit(u);
      try {
        x = child.forward(x);
      } catch (...) {
        leave_unit(u);
        throw;
      }
      x = unit_output(u, x);
      leave_unit(u);
    }
  } catch (...) {
    abort_forward();
    throw;
  }
  end_forward();
  return x;
}

void FullyShardedModel::begin_forward() {
  // A backward that threw never ran its end-of-backward callback.
  reset_backward();
  for (Unit& unit : units_) {
    unit.entered = false;
    unit.left_unmarked = false;
  }
  if (root_ != kNoUnit) gather(units_[root_]);
  // Until a forward has shown every unit inside its scope, every unit is
  // whole: one left out then reads its parameters, not freed memory.
  if (!checked_) {
    for (Unit& unit : units_) gather(unit);
  }
}

void FullyShardedModel::end_forward() {
  std::string outside, unmarked;
  for (const Unit& unit : units_) {
    if (&unit - units_.data() == static_cast<std::ptrdiff_t>(root_)) continue;
    if (!unit.entered) {
      const std::string& type = unit.module->name();
      const std::size_t colon = type.rfind("::");
      outside += (outside.empty() ? "" : ", ") + unit.name + " (" +
                 (colon == std::string::npos ? type : type.substr(colon + 2)) + ")";
    }
    if (unit.left_unmarked) unmarked += (unmarked.empty() ? "" : ", ") + unit.name;
  }
  if (!checked_ && !outside.empty()) {
    abort_forward();
    full_shard_error("the forward ran without entering unit(s) " + outside +
                     ": their parameters are sharded and would be read freed. Put `accelerate::ShardedUnitScope "
                     "unit(*this);` first in the forward of each unit's class and return `unit.output(...)` "
                     "(accelerate/training/sharded_unit_scope.hpp), or choose other units.");
  }
  if (!unmarked.empty()) {
    abort_forward();
    full_shard_error("the forward of unit(s) " + unmarked +
                     " ended without unit.output(...) on their outputs, so their backward would find their "
                     "parameters freed. Return `unit.output(result)` from each unit's forward.");
  }
  checked_ = true;
  // Without a graph no backward follows: free the root now.
  if (!torch::GradMode::is_enabled()) reset_backward();
}

void FullyShardedModel::abort_forward() noexcept { reset_backward(); }

void FullyShardedModel::enter_unit(std::size_t u) {
  Unit& unit = units_.at(u);
  unit.entered = true;
  unit.marked = false;
  gather(unit);
}

void FullyShardedModel::leave_unit(std::size_t u) noexcept {
  Unit& unit = units_[u];
  if (!torch::GradMode::is_enabled()) {
    reshard(unit);
  } else if (unit.marked) {
    // Kept whole for its backward otherwise, which then gathers nothing;
    // reduce() frees it once its gradients are reduce-scattered.
    if (options_.reshard_after_forward) reshard(unit);
  } else {
    // No output was marked: its backward could not gather it again, so it
    // stays whole, and end_forward() names it.
    unit.left_unmarked = true;
  }
}

at::Tensor FullyShardedModel::unit_output(std::size_t u, const at::Tensor& output) {
  Unit& unit = units_.at(u);
  unit.marked = true;
  if (!output.defined() || !torch::GradMode::is_enabled() || !output.requires_grad()) return output;
  // A node of the unit's own, so that the hook runs after the later units'
  // backward and before the earlier ones', also where the unit passed its
  // input through; the hook runs when the gradient is about to enter the
  // unit: the moment to gather it for its backward.
  at::Tensor marked = output.view_as(output);
  marked.register_hook([this, u](const at::Tensor& /*grad*/) { before_unit_backward(u); });
  return marked;
}

bool FullyShardedModel::checkpoints_unit(std::size_t u) const {
  if (!options_.activation_checkpointing) return false;
  // The recompute runs inside the unit's backward and enters no scope: a unit
  // inside it would be read freed, or gathered and marked a second time.
  for (std::size_t inner = 0; inner < units_.size(); ++inner) {
    if (is_inside(inner, u)) {
      full_shard_error("unit " + units_.at(u).display_name() + " checkpoints its body, which holds unit " +
                       units_[inner].display_name() +
                       "; a checkpointed body may hold no unit. Checkpoint the inner units' bodies instead, or "
                       "choose units that do not nest.");
    }
  }
  return true;
}

void FullyShardedModel::gather(Unit& unit) {
  if (unit.gathered) return;
  ACCELERATE_PROFILE_RANGE("accelerate::FullyShardedModel::all_gather");
  // MPI is used FUNNELED: collectives from the thread that built the model,
  // which runs the CPU autograd graph; CUDA units may gather on autograd's
  // device thread through NCCL (not in debug mode, whose checks use MPI).
  if (std::this_thread::get_id() != hooks_->owner && (!unit.whole.is_cuda() || group_.debug_mode())) {
    full_shard_error("unit " + unit.display_name() +
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
    full_shard_error("the backward of unit " + unit.display_name() +
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
  while (next_launch_ < launch_order_.size() && launch_order_[next_launch_] > u &&
         !is_inside(launch_order_[next_launch_], u)) {
    reduce(units_[launch_order_[next_launch_++]]);
  }
  for (std::size_t later = u + 1; later < units_.size(); ++later) {
    // Frozen units passed their gradient on.
    if (!units_[later].trainable && !is_inside(later, u)) reshard(units_[later]);
  }
  gather(unit);
}

void FullyShardedModel::on_gradient_ready(std::size_t u, std::size_t /*p*/) {
  Unit& unit = units_[u];
  if (unit.reduced) {
    // Backward ran an earlier unit's node before this gradient arrived (units
    // on several devices, or nodes made on other threads): it would sit on
    // the whole parameter and leak into the next step.
    full_shard_error("a gradient of unit " + unit.display_name() +
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
        full_shard_error("param group " + std::to_string(g) + " holds the frozen unit " + unit.display_name() +
                         ", whose shard gets no gradient and no optimizer state. Build the optimizer over the "
                         "trainable parameters only.");
      }
      listed[u].insert(p.unsafeGetTensorImpl());
      if (group_of[u] == g) continue;
      if (group_of[u] != std::numeric_limits<std::size_t>::max()) {
        full_shard_error("the parameters of unit " + unit.display_name() + " are in param groups " +
                         std::to_string(group_of[u]) + " and " + std::to_string(g) +
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
        full_shard_error("the optimizer holds some parameters of unit " + unit.display_name() + " but not " + name +
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

std::vector<std::string> FullyShardedModel::unit_names() const {
  std::vector<std::string> names;
  names.reserve(units_.size());
  for (const Unit& unit : units_) names.push_back(unit.name);
  return names;
}

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
