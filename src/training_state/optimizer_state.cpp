#include "training_state/optimizer_state.hpp"

#include "checkpoint/tensor_pieces.hpp"

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <map>
#include <memory>
#include <algorithm>
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
#include "accelerate/checkpoint/shard_layout.hpp"
#include "accelerate/error.hpp"
#include "training_state/state_writer.hpp"

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

// The model's parameters of a sharded optimizer, across its param groups.
std::vector<at::Tensor> model_parameters(const ShardLayout& shards) {
  std::vector<at::Tensor> parameters;
  for (const auto& group : shards.groups)
    parameters.insert(parameters.end(), group.parameters.begin(), group.parameters.end());
  return parameters;
}

// The optimizer's parameters of param group g: a ShardedOptimizer's slices,
// which the layout's pieces index.
const std::vector<at::Tensor>& slices_of(const optim::Optimizer& optimizer, const ShardLayout& shards, std::size_t g,
                                         std::string_view group) {
  const bool matches =
      optimizer.param_groups().size() == shards.groups.size() &&
      std::all_of(shards.groups[g].pieces.begin(), shards.groups[g].pieces.end(), [&](const ShardLayout::Piece& piece) {
        return piece.tensor < optimizer.param_groups()[g].params().size();
      });
  if (!matches) {
    throw ConfigError("checkpoint: group '" + std::string(group) +
                      "': the optimizer's param groups are not the shards its shard layout describes. Save and "
                      "load the optimizer that a ShardedOptimizer wraps.");
  }
  return optimizer.param_groups()[g].params();
}

int copy_in_file(const ShardLayout& shards, int file_ranks, const std::string& where) {
  return detail::copy_in_file(shards.world_size, shards.replicas, shards.replica, file_ranks, "the optimizer's state",
                              where);
}

// This rank's pieces of parameter i of a param group, as views of `tensors`
// (the slices themselves, or state tensors laid out like them).
std::vector<TensorPiece> pieces_of(const ShardLayout::Group& layout, std::size_t i,
                                   const std::vector<at::Tensor>& tensors) {
  std::vector<TensorPiece> pieces;
  for (const ShardLayout::Piece& piece : layout.pieces) {
    if (piece.parameter == i) {
      pieces.push_back({piece.offset, tensors[piece.tensor].narrow(0, piece.shard_offset, piece.count)});
    }
  }
  return pieces;
}

}  // namespace

void check_optimizer_supported(const optim::Optimizer& optimizer, std::string_view group) {
  (void)codec_for(optimizer, group);
}

std::uint64_t optimizer_state_bytes(const optim::Optimizer& optimizer, const ShardLayout* shards) {
  const Codec& codec = codec_for(optimizer, "optimizer");
  std::uint64_t bytes = 0;
  // A slice's impl -> the bytes the file holds for it: the whole parameters
  // of its group for the first slice, nothing for the others.
  std::map<const void*, std::uint64_t> whole;
  if (shards != nullptr) {
    for (std::size_t g = 0; g < shards->groups.size() && g < optimizer.param_groups().size(); ++g) {
      std::uint64_t sum = 0;
      for (const at::Tensor& p : shards->groups[g].parameters) sum += static_cast<std::uint64_t>(p.nbytes());
      for (const at::Tensor& slice : optimizer.param_groups()[g].params()) {
        whole[slice.unsafeGetTensorImpl()] = std::exchange(sum, 0);
      }
    }
  }
  for (const auto& group : optimizer.param_groups()) {
    for (const at::Tensor& parameter : group.params()) {
      const auto& state = optimizer.state();
      const auto it = state.find(state_key<std::decay_t<decltype(state)>>(parameter));
      if (it == state.end()) continue;
      const auto found = whole.find(parameter.unsafeGetTensorImpl());
      for (const auto& [name, tensor] : codec.save_state(*it->second).first) {
        if (!tensor.defined()) continue;
        bytes += found != whole.end() ? found->second : static_cast<std::uint64_t>(tensor.nbytes());
      }
    }
  }
  return bytes;
}

void write_optimizer(StateWriter& writer, std::string_view group, const optim::Optimizer& optimizer,
                     const ShardLayout* shards) {
  const Codec& codec = codec_for(optimizer, group);
  const auto& state = optimizer.state();
  using Map = std::decay_t<decltype(state)>;
  // The file names the model's parameters, sharded or not.
  const std::vector<at::Tensor> parameters = shards != nullptr ? model_parameters(*shards) : all_parameters(optimizer);
  writer.set_attribute(group, "optimizer", std::string(codec.name));
  writer.set_attribute(group, "num_parameters", static_cast<std::int64_t>(parameters.size()));
  std::vector<std::int64_t> group_sizes;
  if (shards != nullptr) {
    for (const auto& layout : shards->groups)
      group_sizes.push_back(static_cast<std::int64_t>(layout.parameters.size()));
    writer.set_attribute(group, "saved_sharded_over", static_cast<std::int64_t>(shards->world_size));
  } else {
    for (const auto& param_group : optimizer.param_groups())
      group_sizes.push_back(static_cast<std::int64_t>(param_group.params().size()));
  }
  writer.set_attribute(group, "param_group_sizes", group_sizes);
  for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    for (const auto& [name, value] : codec.save_options(optimizer.param_groups()[g].options())) {
      writer.set_attribute(param_group_name(group, g), name, value);
    }
  }
  if (shards == nullptr) {
    for (std::size_t p = 0; p < parameters.size(); ++p) {
      const auto it = state.find(state_key<Map>(parameters[p]));
      if (it == state.end()) continue;  // this parameter has not been stepped yet
      const auto [fields, step] = codec.save_state(*it->second);
      const std::string prefix = state_group(group, p);
      if (step) writer.set_attribute(prefix, "step", *step);
      for (const auto& [name, tensor] : fields) {
        if (tensor.defined()) writer.write_replicated(prefix + "/" + name, tensor);
      }
    }
    return;
  }
  // Sharded: the state tensors of the slices are cut back into the
  // parameters they cover, and every rank writes its pieces of each whole
  // tensor; of shards held in several copies, the first copy's ranks.
  const bool writes_pieces =
      copy_in_file(*shards, writer.size(), "checkpoint: group '" + std::string(group) + "'") == 0;
  std::size_t first = 0;  // index of the group's first parameter in the file
  for (std::size_t g = 0; g < shards->groups.size(); ++g) {
    const ShardLayout::Group& layout = shards->groups[g];
    const std::vector<at::Tensor>& slices = slices_of(optimizer, *shards, g, group);
    // The slices are stepped together: all have state, or none (on every rank).
    std::vector<Fields> slice_fields;
    std::optional<std::int64_t> step;
    for (const at::Tensor& slice : slices) {
      const auto it = state.find(state_key<Map>(slice));
      if (it == state.end()) continue;
      auto saved = codec.save_state(*it->second);
      if (slice_fields.empty()) step = saved.second;
      slice_fields.push_back(std::move(saved.first));
    }
    if (!slice_fields.empty() && slice_fields.size() != slices.size()) {
      throw ConfigError("checkpoint: group '" + std::string(group) + "': only " + std::to_string(slice_fields.size()) +
                        " of the " + std::to_string(slices.size()) + " slices of param group " + std::to_string(g) +
                        " have optimizer state; a ShardedOptimizer steps them together. Save after a whole step.");
    }
    if (!slice_fields.empty()) {
      for (std::size_t i = 0; i < layout.parameters.size(); ++i) {
        const std::string prefix = state_group(group, first + i);
        if (step) writer.set_attribute(prefix, "step", *step);
        for (const auto& [name, tensor] : slice_fields.front()) {
          if (!tensor.defined()) continue;
          std::vector<at::Tensor> tensors;
          for (const Fields& fields : slice_fields) tensors.push_back(fields.at(name));
          writer.write_pieces(prefix + "/" + name, tensor.scalar_type(), layout.parameters[i].sizes(),
                              writes_pieces ? pieces_of(layout, i, tensors) : std::vector<TensorPiece>{});
        }
      }
    }
    first += layout.parameters.size();
  }
}

namespace {

// The sharded optimizer's state read from whole per-parameter tensors: for
// each param group, every state tensor of the group's parameters is read in
// this rank's pieces into tensors laid out like the slices (padding zero).
void read_into_shards(CheckpointReader& reader, std::string_view group, optim::Optimizer& optimizer,
                      const ShardLayout& shards, const Codec& codec, const std::string& where) {
  auto& state = optimizer.state();
  using Map = std::decay_t<decltype(state)>;
  const int copy = copy_in_file(shards, reader.size(), where);
  std::vector<std::pair<at::Tensor, std::unique_ptr<optim::OptimizerParamState>>> loaded;
  std::size_t first = 0;
  for (std::size_t g = 0; g < shards.groups.size(); ++g) {
    const ShardLayout::Group& layout = shards.groups[g];
    const std::vector<at::Tensor>& slices = slices_of(optimizer, shards, g, group);
    // Which state tensors the file holds for each parameter of the group.
    std::set<std::string> names;
    std::size_t with_state = 0;
    for (std::size_t i = 0; i < layout.parameters.size(); ++i) {
      std::set<std::string> mine;
      const std::string prefix = state_group(group, first + i) + "/";
      for (const EntryInfo& entry : reader.entries(state_group(group, first + i))) {
        mine.insert(entry.spec.name.substr(prefix.size()));
      }
      if (mine.empty()) continue;
      if (with_state++ > 0 && mine != names) {
        throw ConfigError(where + ": the parameters of param group " + std::to_string(g) +
                          " hold different kinds of state; a sharded optimizer steps them as one, so it cannot load "
                          "this state. Load it without sharding.");
      }
      names = mine;
    }
    if (with_state != 0 && with_state != layout.parameters.size()) {
      throw ConfigError(where + ": only " + std::to_string(with_state) + " of the " +
                        std::to_string(layout.parameters.size()) + " parameters of param group " + std::to_string(g) +
                        " have state; a sharded optimizer steps them as one. Load it without sharding.");
    }
    if (with_state != 0) {
      std::vector<Fields> fields(slices.size());
      for (const std::string& name : names) {
        std::vector<at::Tensor> values;
        for (const at::Tensor& slice : slices) values.push_back(at::zeros_like(slice));
        for (std::size_t i = 0; i < layout.parameters.size(); ++i) {
          reader.read_pieces(state_group(group, first + i) + "/" + name, pieces_of(layout, i, values), copy);
        }
        for (std::size_t t = 0; t < slices.size(); ++t) fields[t][name] = values[t];
      }
      const auto step = reader.attribute(state_group(group, first), "step");
      for (std::size_t t = 0; t < slices.size(); ++t) {
        loaded.emplace_back(slices[t], codec.make_state(fields[t], step ? std::optional<std::int64_t>(
                                                                              std::get<std::int64_t>(*step))
                                                                        : std::nullopt));
      }
    }
    first += layout.parameters.size();
  }
  state.clear();
  for (auto& [shard, param_state] : loaded) state[state_key<Map>(shard)] = std::move(param_state);
}

}  // namespace

void read_optimizer(CheckpointReader& reader, std::string_view group, optim::Optimizer& optimizer,
                    const ShardLayout* shards) {
  const Codec& codec = codec_for(optimizer, group);
  const std::string where = "checkpoint '" + reader.file().string() + "', group '" + std::string(group) + "'";
  const auto saved_name = reader.attribute(group, "optimizer");
  if (!saved_name || std::get<std::string>(*saved_name) != codec.name) {
    throw ConfigError(where + ": the checkpoint holds " +
                      (saved_name ? "a " + std::get<std::string>(*saved_name) : std::string("no")) +
                      " optimizer state, but this optimizer is " + codec.name +
                      ". Prepare the same optimizer types in the same order as when saving.");
  }
  // The per-rank layout of earlier versions (one row per rank of one shard
  // per param group) depended on a bucket cut that no longer exists.
  if (const auto rows = reader.attribute(group, "sharded_world_size")) {
    throw ConfigError(where + ": the optimizer state is stored one row per rank of " +
                      std::to_string(std::get<std::int64_t>(*rows)) +
                      " ranks, the ZeRO layout of versions before whole-tensor sharded state, which this version "
                      "cannot cut into its shards. Export the model with `accelerate-hpc convert` and start the "
                      "optimizer afresh, or resume once with the version that wrote it and save again.");
  }

  std::vector<std::int64_t> group_sizes;
  if (shards != nullptr) {
    for (const auto& layout : shards->groups)
      group_sizes.push_back(static_cast<std::int64_t>(layout.parameters.size()));
  } else {
    for (const auto& param_group : optimizer.param_groups())
      group_sizes.push_back(static_cast<std::int64_t>(param_group.params().size()));
  }
  const auto saved_sizes = reader.attribute(group, "param_group_sizes");
  if (!saved_sizes || std::get<std::vector<std::int64_t>>(*saved_sizes) != group_sizes) {
    throw ConfigError(where +
                      ": the parameter groups differ (the checkpoint's sizes do not match this "
                      "optimizer's). Build the optimizer over the same parameters in the same order.");
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
  if (shards != nullptr) {
    read_into_shards(reader, group, optimizer, *shards, codec, where);
  } else {
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
    const std::vector<at::Tensor> tensors = reader.read_replicated(names);  // one batch: the bulk of a training state
    for (std::size_t k = 0; k < tensors.size(); ++k) {
      const auto& [index, field] = slots[k];
      fields[index][field] = tensors[k].to(parameters[index].device());
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
  }
  for (std::size_t g = 0; g < options.size(); ++g)
    codec.load_options(optimizer.param_groups()[g].options(), options[g]);
}

}  // namespace accelerate::checkpoint::detail
