#include "accelerate/training/activation_checkpoint.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/SequenceNumber.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>
#include <c10/util/StringUtil.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "accelerate/amp/autocast.hpp"
#include "accelerate/error.hpp"
#include "random/generator_state.hpp"

namespace accelerate::training_detail {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The random generators the body may draw from, as the first run found them.
struct RngStates {
  at::Tensor cpu;
  std::vector<std::pair<int, at::Tensor>> cuda;  // (device, state) of the devices the tensors are on
};

RngStates capture_rng(const std::vector<at::Tensor>& tensors) {
  RngStates states;
  states.cpu = detail::generator_state(at::detail::getDefaultCPUGenerator());
  std::set<int> devices;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.is_cuda()) devices.insert(t.get_device());
  }
  for (const int device : devices)
    states.cuda.emplace_back(device, detail::generator_state(detail::cuda_generator(device)));
  return states;
}

void restore_rng(const RngStates& states) {
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  detail::set_generator_state(cpu, states.cpu, "accelerate::activation_checkpoint");
  for (const auto& [device, state] : states.cuda) {
    at::Generator cuda = detail::cuda_generator(device);
    detail::set_generator_state(cuda, state, "accelerate::activation_checkpoint");
  }
}

// The recompute draws the first run's random numbers (dropout's masks), and
// leaves the generators where backward found them: what runs after backward
// draws what it would have drawn without checkpointing.
class RngFork {
 public:
  explicit RngFork(const RngStates& first_run) {
    now_.cpu = detail::generator_state(at::detail::getDefaultCPUGenerator());
    for (const auto& [device, state] : first_run.cuda) {
      now_.cuda.emplace_back(device, detail::generator_state(detail::cuda_generator(device)));
    }
    restore_rng(first_run);
  }
  ~RngFork() {
    try {
      restore_rng(now_);
    } catch (...) {  // cannot fail for states taken from the same generators
    }
  }
  RngFork(const RngFork&) = delete;
  RngFork& operator=(const RngFork&) = delete;

 private:
  RngStates now_;
};

struct AutocastState {
  bool cpu = false, cuda = false;
  c10::ScalarType cpu_dtype = c10::kBFloat16, cuda_dtype = c10::kHalf;

  static AutocastState now() {
    return {.cpu = is_autocast_enabled(c10::DeviceType::CPU),
            .cuda = is_autocast_enabled(c10::DeviceType::CUDA),
            .cpu_dtype = autocast_dtype(c10::DeviceType::CPU),
            .cuda_dtype = autocast_dtype(c10::DeviceType::CUDA)};
  }
};

// What backward needs besides the saved inputs: the body, where the inputs
// go among its arguments, the module's parameters (held here rather than
// saved: FULL_SHARD frees and refills their storage between forward and
// backward), and the state the first run saw.
struct CheckpointState : torch::CustomClassHolder {
  CheckpointBody body;
  std::size_t arity = 0;               // the body's arguments
  std::vector<std::size_t> positions;  // the argument each defined input is
  std::vector<at::Tensor> parameters;  // distinct, trainable
  std::string module_name;
  RngStates rng;
  AutocastState autocast;

  [[nodiscard]] std::vector<at::Tensor> arguments(const std::vector<at::Tensor>& inputs) const {
    std::vector<at::Tensor> all(arity);
    for (std::size_t i = 0; i < positions.size(); ++i) all[positions[i]] = inputs[i];
    return all;
  }
};

// The recomputed graph must end in the body's inputs and the module's
// parameters: a gradient the node does not return would be lost silently.
void check_graph(const CheckpointState& state, const std::vector<at::Tensor>& roots,
                 const std::vector<at::Tensor>& inputs, std::uint64_t first_node) {
  std::unordered_set<const c10::TensorImpl*> allowed;
  for (const at::Tensor& t : inputs) allowed.insert(t.unsafeGetTensorImpl());
  for (const at::Tensor& t : state.parameters) allowed.insert(t.unsafeGetTensorImpl());
  std::vector<torch::autograd::Node*> stack;
  std::unordered_set<const torch::autograd::Node*> seen;
  for (const at::Tensor& root : roots) {
    torch::autograd::Node* node = torch::autograd::impl::gradient_edge(root).function.get();
    if (node != nullptr && seen.insert(node).second) stack.push_back(node);
  }
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (const auto* leaf = dynamic_cast<const torch::autograd::AccumulateGrad*>(node)) {
      if (allowed.count(leaf->variable.unsafeGetTensorImpl()) != 0) continue;
      throw ConfigError("accelerate::activation_checkpoint: the checkpointed body reads a parameter of shape " +
                        c10::str(leaf->variable.sizes()) + " that is not a parameter of the module passed (" +
                        state.module_name +
                        ") nor one of the body's inputs; its gradient would be lost. Pass the module that owns it "
                        "(one that holds every parameter the body reads), or pass the tensor as an input.");
    }
    if (node->sequence_nr() < first_node) {
      // A node of the outer graph: the body read a tensor computed before it.
      throw ConfigError(
          "accelerate::activation_checkpoint: the checkpointed body reads a tensor that needs a gradient (made by " +
          node->name() +
          ") computed outside the body and not passed to it; its gradient would be lost. Pass it to "
          "activation_checkpoint() as an input.");
    }
    for (const torch::autograd::Edge& edge : node->next_edges()) {
      if (edge.function && seen.insert(edge.function.get()).second) stack.push_back(edge.function.get());
    }
  }
}

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // `tensors`: the defined inputs, then the parameters; only those are the
  // node's inputs, so that the outer backward accumulates the parameters'
  // gradients itself (and fires every reducer's hooks as it would).
  static variable_list forward(AutogradContext* ctx, at::TensorList tensors, std::size_t inputs,
                               const c10::intrusive_ptr<CheckpointState>& state) {
    const std::vector<at::Tensor> given(tensors.begin(), tensors.begin() + static_cast<std::ptrdiff_t>(inputs));
    ctx->save_for_backward(given);
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    at::NoGradGuard no_grad;  // (Function::apply already holds one) no activations kept
    variable_list outputs;
    {
      // Autocast would cache this run's casts of the weights, made without a
      // graph, for later uses in the region that need one.
      const bool cache = at::autocast::is_autocast_cache_enabled();
      at::autocast::set_autocast_cache_enabled(false);
      try {
        outputs = state->body(state->arguments(given));
      } catch (...) {
        at::autocast::set_autocast_cache_enabled(cache);
        throw;
      }
      at::autocast::set_autocast_cache_enabled(cache);
    }
    for (const at::Tensor& output : outputs) {
      if (!output.defined()) {
        throw ConfigError(
            "accelerate::activation_checkpoint: the checkpointed body returned an undefined tensor; return "
            "defined tensors only.");
      }
    }
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto state = c10::static_intrusive_pointer_cast<CheckpointState>(ctx->saved_data["state"].toCapsule());
    const variable_list saved = ctx->get_saved_variables();
    // Leaves of the recomputed graph, requiring a gradient as the inputs did.
    std::vector<at::Tensor> inputs;
    inputs.reserve(saved.size());
    for (const at::Tensor& t : saved) {
      at::Tensor leaf = t.detach();
      if (t.requires_grad()) leaf.requires_grad_(true);
      inputs.push_back(std::move(leaf));
    }
    std::vector<at::Tensor> outputs;
    std::uint64_t first_node = 0;
    {
      const RngFork rng(state->rng);
      // The first run's autocast (backward usually runs outside the region),
      // without caching casts that would outlive this nested graph.
      const AutocastState now = AutocastState::now();
      const AutocastState& then = state->autocast;
      std::optional<AutocastGuard> cpu, cuda;
      if (then.cpu || now.cpu) {
        cpu.emplace(c10::DeviceType::CPU, then.cpu_dtype, AutocastKwargs{.enabled = then.cpu, .cache_enabled = false});
      }
      if (then.cuda || now.cuda) {
        cuda.emplace(c10::DeviceType::CUDA, then.cuda_dtype,
                     AutocastKwargs{.enabled = then.cuda, .cache_enabled = false});
      }
      const at::AutoGradMode grad(true);
      first_node = at::sequence_number::peek();
      outputs = state->body(state->arguments(inputs));
    }
    if (outputs.size() != grad_outputs.size()) {
      throw ConfigError("accelerate::activation_checkpoint: the checkpointed body returned " +
                        std::to_string(outputs.size()) + " tensors when run again in backward, " +
                        std::to_string(grad_outputs.size()) +
                        " the first time; it must compute the same thing both times.");
    }
    std::vector<at::Tensor> roots, root_grads;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].defined() && outputs[i].requires_grad() && grad_outputs[i].defined()) {
        roots.push_back(outputs[i]);
        root_grads.push_back(grad_outputs[i]);
      }
    }
    check_graph(*state, roots, inputs, first_node);
    // Gradients of the inputs that need one, then of every parameter.
    std::vector<at::Tensor> wrt;
    for (const at::Tensor& t : inputs) {
      if (t.requires_grad()) wrt.push_back(t);
    }
    wrt.insert(wrt.end(), state->parameters.begin(), state->parameters.end());
    variable_list grads;
    if (!roots.empty() && !wrt.empty()) {
      // grad(), not backward(): nothing is accumulated inside this nested
      // pass, so no gradient hook fires here; the outer pass accumulates what
      // this node returns.
      grads = torch::autograd::grad(roots, wrt, root_grads, /*retain_graph=*/false, /*create_graph=*/false,
                                    /*allow_unused=*/true);
    } else {
      grads.resize(wrt.size());
    }
    variable_list result;
    result.reserve(inputs.size() + state->parameters.size() + 2);
    std::size_t next = 0;
    for (const at::Tensor& t : inputs) result.push_back(t.requires_grad() ? grads[next++] : at::Tensor());
    for (std::size_t p = 0; p < state->parameters.size(); ++p) result.push_back(grads[next++]);
    result.emplace_back();  // `inputs` and `state` are no tensors
    result.emplace_back();
    return result;
  }
};

}  // namespace

std::vector<at::Tensor> run_checkpointed(const torch::nn::Module& module, CheckpointBody body,
                                         std::vector<at::Tensor> inputs) {
  std::vector<at::Tensor> parameters;
  std::unordered_set<const c10::TensorImpl*> distinct;
  for (const at::Tensor& p : module.parameters(/*recurse=*/true)) {
    if (p.requires_grad() && distinct.insert(p.unsafeGetTensorImpl()).second) parameters.push_back(p);
  }
  bool needs_grad = false;
  for (const at::Tensor& t : inputs) needs_grad = needs_grad || (t.defined() && t.requires_grad());
  // Evaluation, or nothing to differentiate: nothing to recompute.
  if (!at::GradMode::is_enabled() || (!needs_grad && parameters.empty())) return body(inputs);

  auto state = c10::make_intrusive<CheckpointState>();
  state->arity = inputs.size();
  std::vector<at::Tensor> tensors;
  tensors.reserve(inputs.size() + parameters.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    state->positions.push_back(i);
    tensors.push_back(inputs[i]);
  }
  const std::size_t defined = tensors.size();
  tensors.insert(tensors.end(), parameters.begin(), parameters.end());
  state->rng = capture_rng(tensors);
  state->autocast = AutocastState::now();
  state->body = std::move(body);
  state->parameters = std::move(parameters);
  state->module_name = module.name();
  return CheckpointFunction::apply(at::TensorList(tensors), defined, state);
}

}  // namespace accelerate::training_detail
