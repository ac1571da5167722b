#include "checkpoint/optimizer_state.hpp"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/checkpoint/checkpoint_writer.hpp"
#include "accelerate/error.hpp"

namespace accelerate::checkpoint::detail {
namespace {

namespace optim = torch::optim;
using Fields = std::map<std::string, at::Tensor>;
using Scalars = std::map<std::string, double>;

// The key of a parameter in Optimizer::state(): a string of the TensorImpl
// address in LibTorch 1.x, the address itself in 2.x.
template <class Map>
typename Map::key_type state_key(const at::Tensor& parameter) {
  using Key = typename Map::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;  // what LibTorch 1.x writes: the pointer through operator<<
    address << parameter.unsafeGetTensorImpl();
    return address.str();
  } else {
    return static_cast<Key>(parameter.unsafeGetTensorImpl());
  }
}

// How one optimizer type maps to tensors and numbers. Per-parameter state:
// tensors (undefined ones are not stored) and an optional step count.
struct Codec {
  const char* name;
  std::function<bool(const optim::Optimizer&)> matches;
  std::function<std::pair<Fields, std::optional<std::int64_t>>(const optim::OptimizerParamState&)> save_state;
  std::function<std::unique_ptr<optim::OptimizerParamState>(const Fields&, std::optional<std::int64_t>)> make_state;
  std::function<Scalars(const optim::OptimizerOptions&)> save_options;
  std::function<void(optim::OptimizerOptions&, const Scalars&)> load_options;
};

template <class T>
bool is(const optim::Optimizer& optimizer) {
  return dynamic_cast<const T*>(&optimizer) != nullptr;
}

at::Tensor field(const Fields& fields, const char* name) {
  const auto it = fields.find(name);
  return it == fields.end() ? at::Tensor() : it->second;
}

double number(const Scalars& scalars, const char* name) {
  const auto it = scalars.find(name);
  if (it == scalars.end()) {
    throw ConfigError(std::string("checkpoint: the optimizer hyper-parameter '") + name +
                      "' is missing from the checkpoint's param group");
  }
  return it->second;
}

template <class Options>
Options& as(optim::OptimizerOptions& options) {
  return static_cast<Options&>(options);
}
template <class Options>
const Options& as(const optim::OptimizerOptions& options) {
  return static_cast<const Options&>(options);
}

template <class OptimizerT, class StateT, class OptionsT>
Codec adam_like(const char* name) {
  return Codec{name,
               [](const optim::Optimizer& o) { return is<OptimizerT>(o); },
               [](const optim::OptimizerParamState& s) {
                 const auto& state = static_cast<const StateT&>(s);
                 return std::pair{Fields{{"exp_avg", state.exp_avg()},
                                         {"exp_avg_sq", state.exp_avg_sq()},
                                         {"max_exp_avg_sq", state.max_exp_avg_sq()}},
                                  std::optional<std::int64_t>(state.step())};
               },
               [](const Fields& f, std::optional<std::int64_t> step) -> std::unique_ptr<optim::OptimizerParamState> {
                 auto state = std::make_unique<StateT>();
                 state->step(step.value_or(0));
                 state->exp_avg(field(f, "exp_avg"));
                 state->exp_avg_sq(field(f, "exp_avg_sq"));
                 state->max_exp_avg_sq(field(f, "max_exp_avg_sq"));
                 return state;
               },
               [](const optim::OptimizerOptions& o) {
                 const auto& options = as<OptionsT>(o);
                 return Scalars{{"lr", options.lr()},
                                {"beta1", std::get<0>(options.betas())},
                                {"beta2", std::get<1>(options.betas())},
                                {"eps", options.eps()},
                                {"weight_decay", options.weight_decay()},
                                {"amsgrad", options.amsgrad() ? 1.0 : 0.0}};
               },
               [](optim::OptimizerOptions& o, const Scalars& s) {
                 auto& options = as<OptionsT>(o);
                 options.lr(number(s, "lr"));
                 options.betas(std::make_tuple(number(s, "beta1"), number(s, "beta2")));
                 options.eps(number(s, "eps"));
                 options.weight_decay(number(s, "weight_decay"));
                 options.amsgrad(number(s, "amsgrad") != 0.0);
               }};
}

const std::vector<Codec>& codecs() {
  static const std::vector<Codec> list{
      Codec{"SGD", [](const optim::Optimizer& o) { return is<optim::SGD>(o); },
            [](const optim::OptimizerParamState& s) {
              const auto& state = static_cast<const optim::SGDParamState&>(s);
              return std::pair{Fields{{"momentum_buffer", state.momentum_buffer()}}, std::optional<std::int64_t>()};
            },
            [](const Fields& f, std::optional<std::int64_t>) -> std::unique_ptr<optim::OptimizerParamState> {
              auto state = std::make_unique<optim::SGDParamState>();
              state->momentum_buffer(field(f, "momentum_buffer"));
              return state;
            },
            [](const optim::OptimizerOptions& o) {
              const auto& options = as<optim::SGDOptions>(o);
              return Scalars{{"lr", options.lr()},
                             {"momentum", options.momentum()},
                             {"dampening", options.dampening()},
                             {"weight_decay", options.weight_decay()},
                             {"nesterov", options.nesterov() ? 1.0 : 0.0}};
            },
            [](optim::OptimizerOptions& o, const Scalars& s) {
              auto& options = as<optim::SGDOptions>(o);
              options.lr(number(s, "lr"));
              options.momentum(number(s, "momentum"));
              options.dampening(number(s, "dampening"));
              options.weight_decay(number(s, "weight_decay"));
              options.nesterov(number(s, "nesterov") != 0.0);
            }},
      // AdamW before Adam: the checks are dynamic_casts to unrelated classes,
      // but keep the more specific first should that ever change.
      adam_like<optim::AdamW, optim::AdamWParamState, optim::AdamWOptions>("AdamW"),
      adam_like<optim::Adam, optim::AdamParamState, optim::AdamOptions>("Adam"),
      Codec{"Adagrad", [](const optim::Optimizer& o) { return is<optim::Adagrad>(o); },
            [](const optim::OptimizerParamState& s) {
              const auto& state = static_cast<const optim::AdagradParamState&>(s);
              return std::pair{Fields{{"sum", state.sum()}}, std::optional<std::int64_t>(state.step())};
            },
            [](const Fields& f, std::optional<std::int64_t> step) -> std::unique_ptr<optim::OptimizerParamState> {
              auto state = std::make_unique<optim::AdagradParamState>();
              state->sum(field(f, "sum"));
              state->step(step.value_or(0));
              return state;
            },
            [](const optim::OptimizerOptions& o) {
              const auto& options = as<optim::AdagradOptions>(o);
              return Scalars{{"lr", options.lr()},
                             {"lr_decay", options.lr_decay()},
                             {"weight_decay", options.weight_decay()},
                             {"initial_accumulator_value", options.initial_accumulator_value()},
                             {"eps", options.eps()}};
            },
            [](optim::OptimizerOptions& o, const Scalars& s) {
              auto& options = as<optim::AdagradOptions>(o);
              options.lr(number(s, "lr"));
              options.lr_decay(number(s, "lr_decay"));
              options.weight_decay(number(s, "weight_decay"));
              options.initial_accumulator_value(number(s, "initial_accumulator_value"));
              options.eps(number(s, "eps"));
            }},
      Codec{"RMSprop", [](const optim::Optimizer& o) { return is<optim::RMSprop>(o); },
            [](const optim::OptimizerParamState& s) {
              const auto& state = static_cast<const optim::RMSpropParamState&>(s);
              return std::pair{Fields{{"square_avg", state.square_avg()},
                                      {"momentum_buffer", state.momentum_buffer()},
                                      {"grad_avg", state.grad_avg()}},
                               std::optional<std::int64_t>(state.step())};
            },
            [](const Fields& f, std::optional<std::int64_t> step) -> std::unique_ptr<optim::OptimizerParamState> {
              auto state = std::make_unique<optim::RMSpropParamState>();
              state->square_avg(field(f, "square_avg"));
              state->momentum_buffer(field(f, "momentum_buffer"));
              state->grad_avg(field(f, "grad_avg"));
              state->step(step.value_or(0));
              return state;
            },
            [](const optim::OptimizerOptions& o) {
              const auto& options = as<optim::RMSpropOptions>(o);
              return Scalars{{"lr", options.lr()},
                             {"alpha", options.alpha()},
                             {"eps", options.eps()},
                             {"weight_decay", options.weight_decay()},
                             {"momentum", options.momentum()},
                             {"centered", options.centered() ? 1.0 : 0.0}};
            },
            [](optim::OptimizerOptions& o, const Scalars& s) {
              auto& options = as<optim::RMSpropOptions>(o);
              options.lr(number(s, "lr"));
              options.alpha(number(s, "alpha"));
              options.eps(number(s, "eps"));
              options.weight_decay(number(s, "weight_decay"));
              options.momentum(number(s, "momentum"));
              options.centered(number(s, "centered") != 0.0);
            }},
  };
  return list;
}

const Codec* find_codec(const optim::Optimizer& optimizer) {
  for (const Codec& codec : codecs()) {
    if (codec.matches(optimizer)) return &codec;
  }
  return nullptr;
}

const Codec& codec_for(const optim::Optimizer& optimizer, std::string_view group) {
  if (const Codec* codec = find_codec(optimizer)) return *codec;
  throw ConfigError("checkpoint: cannot save or load the optimizer of group '" + std::string(group) + "' (" +
                    typeid(optimizer).name() +
                    "): the supported optimizers are SGD, Adam, AdamW, Adagrad and RMSprop. Save this "
                    "optimizer's state yourself, e.g. with register_for_checkpointing.");
}

std::vector<at::Tensor> all_parameters(const optim::Optimizer& optimizer) {
  std::vector<at::Tensor> parameters;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& parameter : group.params()) parameters.push_back(parameter);
  }
  return parameters;
}

std::string state_group(std::string_view group, std::size_t index) {
  return std::string(group) + "/state/" + std::to_string(index);
}

std::string param_group_name(std::string_view group, std::size_t index) {
  return std::string(group) + "/param_groups/" + std::to_string(index);
}

}  // namespace

void check_optimizer_supported(const optim::Optimizer& optimizer, std::string_view group) {
  (void)codec_for(optimizer, group);
}

std::uint64_t optimizer_state_bytes(const optim::Optimizer& optimizer) {
  const Codec& codec = codec_for(optimizer, "optimizer");
  std::uint64_t bytes = 0;
  for (const auto& [key, state] : optimizer.state()) {
    for (const auto& [name, tensor] : codec.save_state(*state).first) {
      if (tensor.defined()) bytes += static_cast<std::uint64_t>(tensor.nbytes());
    }
  }
  return bytes;
}

void write_optimizer(CheckpointWriter& writer, std::string_view group, const optim::Optimizer& optimizer,
                     int sharded_over) {
  const bool per_rank = sharded_over > 0;
  const Codec& codec = codec_for(optimizer, group);
  const auto& state = optimizer.state();
  using Map = std::decay_t<decltype(state)>;
  const std::vector<at::Tensor> parameters = all_parameters(optimizer);
  writer.set_attribute(group, "optimizer", std::string(codec.name));
  writer.set_attribute(group, "num_parameters", static_cast<std::int64_t>(parameters.size()));
  std::vector<std::int64_t> group_sizes;
  for (const auto& param_group : optimizer.param_groups()) {
    group_sizes.push_back(static_cast<std::int64_t>(param_group.params().size()));
  }
  writer.set_attribute(group, "param_group_sizes", group_sizes);
  if (per_rank) writer.set_attribute(group, "sharded_world_size", static_cast<std::int64_t>(sharded_over));
  for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    for (const auto& [name, value] : codec.save_options(optimizer.param_groups()[g].options())) {
      writer.set_attribute(param_group_name(group, g), name, value);
    }
  }
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    const auto it = state.find(state_key<Map>(parameters[p]));
    if (it == state.end()) continue;  // this parameter has not been stepped yet
    const auto [fields, step] = codec.save_state(*it->second);
    const std::string prefix = state_group(group, p);
    if (step) writer.set_attribute(prefix, "step", *step);
    for (const auto& [name, tensor] : fields) {
      if (!tensor.defined()) continue;
      if (per_rank) {
        writer.write_per_rank(prefix + "/" + name, tensor);
      } else {
        writer.write_replicated(prefix + "/" + name, tensor);
      }
    }
  }
}

void read_optimizer(CheckpointReader& reader, std::string_view group, optim::Optimizer& optimizer, int sharded_over) {
  const bool per_rank = sharded_over > 0;
  const Codec& codec = codec_for(optimizer, group);
  const std::string where = "checkpoint '" + reader.file().string() + "', group '" + std::string(group) + "'";
  const auto saved_name = reader.attribute(group, "optimizer");
  if (!saved_name || std::get<std::string>(*saved_name) != codec.name) {
    throw ConfigError(where + ": the checkpoint holds " +
                      (saved_name ? "a " + std::get<std::string>(*saved_name) : std::string("no")) +
                      " optimizer state, but this optimizer is " + codec.name +
                      ". Prepare the same optimizer types in the same order as when saving.");
  }
  const auto sharded = reader.attribute(group, "sharded_world_size");
  if (sharded.has_value() != per_rank) {
    throw ConfigError(where + (per_rank ? ": the checkpoint holds the whole optimizer state, but this optimizer is "
                                          "sharded (ZeRO). Load it without sharding, or start the sharded run afresh."
                                        : ": the checkpoint holds optimizer state sharded over " +
                                              std::to_string(std::get<std::int64_t>(*sharded)) +
                                              " ranks (ZeRO), but this optimizer is not sharded. Load it with the "
                                              "same sharding."));
  }
  if (per_rank && std::get<std::int64_t>(*sharded) != sharded_over) {
    throw ConfigError(where + ": the optimizer state was sharded over " +
                      std::to_string(std::get<std::int64_t>(*sharded)) + " ranks and " + std::to_string(sharded_over) +
                      " ranks load it; resharding optimizer state is not built yet. Resume on " +
                      std::to_string(std::get<std::int64_t>(*sharded)) + " ranks.");
  }

  std::vector<std::int64_t> group_sizes;
  for (const auto& param_group : optimizer.param_groups()) {
    group_sizes.push_back(static_cast<std::int64_t>(param_group.params().size()));
  }
  const auto saved_sizes = reader.attribute(group, "param_group_sizes");
  if (!saved_sizes || std::get<std::vector<std::int64_t>>(*saved_sizes) != group_sizes) {
    throw ConfigError(where +
                      ": the parameter groups differ (the checkpoint's sizes do not match this "
                      "optimizer's). Build the optimizer over the same parameters in the same order.");
  }

  // Read everything first, then replace the optimizer's state in one go.
  const std::vector<at::Tensor> parameters = all_parameters(optimizer);
  std::map<std::size_t, Fields> fields;
  const std::string state_prefix = std::string(group) + "/state/";
  std::vector<std::string> names;
  std::vector<std::pair<std::size_t, std::string>> slots;  // (parameter, field) of each name
  for (const EntryInfo& entry : reader.entries(std::string(group) + "/state")) {
    const std::string rest = entry.spec.name.substr(state_prefix.size());
    const auto slash = rest.find('/');
    const std::size_t index = std::stoull(rest.substr(0, slash));
    if (index >= parameters.size()) {
      throw ConfigError(where + ": state for parameter " + std::to_string(index) + " but the optimizer has " +
                        std::to_string(parameters.size()) + " parameters");
    }
    names.push_back(entry.spec.name);
    slots.emplace_back(index, rest.substr(slash + 1));
  }
  std::vector<at::Tensor> tensors;
  if (per_rank) {
    for (const std::string& name : names) tensors.push_back(reader.read_per_rank(name));
  } else {
    tensors = reader.read_replicated(names);  // one batch: the bulk of a training state
  }
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const auto& [index, field] = slots[k];
    fields[index][field] = tensors[k].to(parameters[index].device());
  }
  std::vector<Scalars> options(optimizer.param_groups().size());
  for (std::size_t g = 0; g < options.size(); ++g) {
    for (const auto& [name, unused] : codec.save_options(optimizer.param_groups()[g].options())) {
      const auto value = reader.attribute(param_group_name(group, g), name);
      if (!value || !std::holds_alternative<double>(*value)) {
        throw ConfigError(where + ": param group " + std::to_string(g) + " lacks the hyper-parameter '" + name + "'");
      }
      options[g][name] = std::get<double>(*value);
    }
  }
  std::map<std::size_t, std::optional<std::int64_t>> steps;
  for (const auto& [index, unused] : fields) {
    const auto step = reader.attribute(state_group(group, index), "step");
    steps[index] = step ? std::optional<std::int64_t>(std::get<std::int64_t>(*step)) : std::nullopt;
  }

  auto& state = optimizer.state();
  using Map = std::decay_t<decltype(state)>;
  state.clear();
  for (const auto& [index, tensors] : fields) {
    state[state_key<Map>(parameters[index])] = codec.make_state(tensors, steps[index]);
  }
  for (std::size_t g = 0; g < options.size(); ++g)
    codec.load_options(optimizer.param_groups()[g].options(), options[g]);
}

}  // namespace accelerate::checkpoint::detail
