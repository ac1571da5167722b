#include "accelerate/comm/operations.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <set>

#include "accelerate/error.hpp"
#include "detail/dtype_names.hpp"
#include "detail/fnv1a.hpp"

namespace accelerate {
namespace {

const std::string kRoot = "data";

// --- describing values ---------------------------------------------------------

std::string dtype_name(c10::ScalarType type) { return std::string(detail::describe_dtype(type)); }

std::string sizes_text(at::IntArrayRef sizes, bool first_free) {
  std::string text = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) text += ", ";
    text += (i == 0 && first_free) ? std::string("*") : std::to_string(sizes[i]);
  }
  return text + "]";
}

// "str", "int", "List[int]", "Dict[str, Tensor]", … (Python's spelling).
std::string type_name(const c10::IValue& value) {
  if (value.isTensor()) return "Tensor";
  if (value.isNone()) return "None";
  try {
    return value.type()->annotation_str();
  } catch (const std::exception&) {
    return value.tagKind();
  }
}

// "a value of type str" / "None": how an unwanted leaf is named in messages.
std::string leaf_description(const c10::IValue& value) {
  return value.isNone() ? std::string("None") : "a value of type " + type_name(value);
}

std::string index_path(const std::string& parent, std::size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

std::string key_path(const std::string& parent, const c10::IValue& key) {
  if (key.isString()) return parent + "['" + key.toStringRef() + "']";
  if (key.isInt()) return parent + "[" + std::to_string(key.toInt()) + "]";
  return parent + "[<" + type_name(key) + " key>]";
}

// --- building containers ----------------------------------------------------------

c10::TypePtr simple_type(const c10::IValue& value) {
  if (value.isTensor()) return c10::TensorType::get();
  if (value.isInt()) return c10::IntType::get();
  if (value.isDouble()) return c10::FloatType::get();
  if (value.isBool()) return c10::BoolType::get();
  if (value.isString()) return c10::StringType::get();
  return nullptr;
}

bool fits(const c10::IValue& value, const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::AnyType) return true;
  if (type->kind() == c10::TypeKind::TensorType) return value.isTensor();
  return value.type()->isSubtypeOf(*type);
}

// Element type of a rebuilt list or dict: the previous one when every new
// element still fits it, else the elements' common simple type, else Any.
c10::TypePtr element_type(const std::vector<c10::IValue>& elements, const c10::TypePtr& previous) {
  if (previous && previous->kind() != c10::TypeKind::AnyType &&
      std::all_of(elements.begin(), elements.end(), [&](const c10::IValue& e) { return fits(e, previous); })) {
    return previous;
  }
  if (elements.empty()) return previous ? previous : c10::TypePtr(c10::AnyType::get());
  const c10::TypePtr first = simple_type(elements.front());
  const bool same = first && std::all_of(elements.begin(), elements.end(), [&](const c10::IValue& e) {
                      const c10::TypePtr type = simple_type(e);
                      return type && type->kind() == first->kind();
                    });
  return same ? first : c10::TypePtr(c10::AnyType::get());
}

c10::IValue build_list(std::vector<c10::IValue> elements, const c10::TypePtr& previous) {
  c10::impl::GenericList list(element_type(elements, previous));
  list.reserve(elements.size());
  for (auto& element : elements) list.push_back(std::move(element));
  return list;
}

c10::IValue build_dict(const c10::TypePtr& key_type, std::vector<std::pair<c10::IValue, c10::IValue>> items,
                       const c10::TypePtr& previous_value_type) {
  std::vector<c10::IValue> values;
  values.reserve(items.size());
  for (const auto& item : items) values.push_back(item.second);
  c10::impl::GenericDict dict(key_type, element_type(values, previous_value_type));
  dict.reserve(items.size());
  for (auto& [key, value] : items) dict.insert(std::move(key), std::move(value));
  return dict;
}

// --- traversal -------------------------------------------------------------------

using NodeVisitor = std::function<void(const c10::IValue& node, const std::string& path)>;
using LeafMapper = std::function<c10::IValue(const c10::IValue& leaf, const std::string& path)>;

// Calls `visitor` on every node, containers before their children, in order.
void visit(const c10::IValue& node, const std::string& path, const NodeVisitor& visitor) {
  visitor(node, path);
  if (node.isList()) {
    const auto elements = node.toListRef();
    for (std::size_t i = 0; i < elements.size(); ++i) visit(elements[i], index_path(path, i), visitor);
  } else if (node.isTuple()) {
    const auto& elements = node.toTupleRef().elements();
    for (std::size_t i = 0; i < elements.size(); ++i) visit(elements[i], index_path(path, i), visitor);
  } else if (node.isGenericDict()) {
    for (const auto& entry : node.toGenericDict()) visit(entry.value(), key_path(path, entry.key()), visitor);
  }
}

// A copy of `node` with every leaf replaced by mapper(leaf). Values under the
// string keys in `skip_keys` are kept as they are.
c10::IValue rebuild(const c10::IValue& node, const std::string& path, const LeafMapper& mapper,
                    const std::set<std::string>* skip_keys = nullptr) {
  if (node.isList()) {
    const auto elements = node.toListRef();
    std::vector<c10::IValue> mapped;
    mapped.reserve(elements.size());
    for (std::size_t i = 0; i < elements.size(); ++i) {
      mapped.push_back(rebuild(elements[i], index_path(path, i), mapper, skip_keys));
    }
    return build_list(std::move(mapped), node.toList().elementType());
  }
  if (node.isTuple()) {
    const auto& elements = node.toTupleRef().elements();
    std::vector<c10::IValue> mapped;
    mapped.reserve(elements.size());
    for (std::size_t i = 0; i < elements.size(); ++i) {
      mapped.push_back(rebuild(elements[i], index_path(path, i), mapper, skip_keys));
    }
    return c10::ivalue::Tuple::create(std::move(mapped));
  }
  if (node.isGenericDict()) {
    const auto dict = node.toGenericDict();
    std::vector<std::pair<c10::IValue, c10::IValue>> items;
    items.reserve(dict.size());
    for (const auto& entry : dict) {
      const bool skip =
          skip_keys != nullptr && entry.key().isString() && skip_keys->count(entry.key().toStringRef()) > 0;
      items.emplace_back(entry.key(),
                         skip ? entry.value() : rebuild(entry.value(), key_path(path, entry.key()), mapper, skip_keys));
    }
    return build_dict(dict.keyType(), std::move(items), dict.valueType());
  }
  return mapper(node, path);
}

// `data` with its tensors replaced, in traversal order, by `tensors`.
c10::IValue replace_tensors(const c10::IValue& data, const std::vector<at::Tensor>& tensors) {
  std::size_t next = 0;
  return rebuild(data, kRoot, [&](const c10::IValue& leaf, const std::string&) -> c10::IValue {
    if (!leaf.isTensor()) return leaf;
    return tensors.at(next++);
  });
}

// --- agreement before a collective ------------------------------------------------------

constexpr std::string_view kTensorsOnly =
    "Pass nested lists, tuples and string-keyed dicts whose leaves are all tensors";

// What one rank is about to send: its tensors in traversal order, a
// fingerprint of everything the ranks must agree on (one entry per node),
// and the first problem with the input, if any.
struct Inventory {
  std::vector<at::Tensor> tensors;
  std::vector<std::string> paths;
  std::vector<std::string> entries;
  std::string problem;

  /// Keeps the first problem; `text` is a sentence naming the path, `advice` what to do.
  void note_problem(const std::string& text, std::string_view advice) {
    if (problem.empty()) problem = text + ". " + std::string(advice);
  }
};

using Fingerprint = std::function<std::string(const at::Tensor&)>;

Inventory take_inventory(const c10::IValue& data, const Fingerprint& fingerprint) {
  Inventory inventory;
  visit(data, kRoot, [&](const c10::IValue& node, const std::string& path) {
    if (node.isList()) {
      inventory.entries.push_back(path + ": list of " + std::to_string(node.toListRef().size()));
    } else if (node.isTuple()) {
      inventory.entries.push_back(path + ": tuple of " + std::to_string(node.toTupleRef().elements().size()));
    } else if (node.isGenericDict()) {
      inventory.entries.push_back(path + ": dict of " + std::to_string(node.toGenericDict().size()));
    } else if (node.isTensor()) {
      const at::Tensor& tensor = node.toTensor();
      if (!tensor.defined()) {
        inventory.note_problem(path + " is an undefined tensor", kTensorsOnly);
        inventory.entries.push_back(path + ": undefined tensor");
        return;
      }
      inventory.tensors.push_back(tensor);
      inventory.paths.push_back(path);
      inventory.entries.push_back(path + ": " + fingerprint(tensor));
    } else {
      inventory.note_problem(path + " is " + leaf_description(node) + ", not a tensor", kTensorsOnly);
      inventory.entries.push_back(path + ": " + type_name(node));
    }
  });
  return inventory;
}

uint64_t fnv1a(const std::vector<std::string>& entries) {
  uint64_t hash = detail::kFnv1aBasis;
  for (const auto& entry : entries) hash = detail::fnv1a("\n", detail::fnv1a(entry, hash));
  return hash;
}

// Collective. Returns when every rank's input is valid and all fingerprints
// are equal; otherwise every rank throws the same ConfigError (some input
// was invalid; `problem` names it and says what to do) or CollectiveMismatch
// (the inputs differ; `requirement` says what must agree).
void agree(ProcessGroup& group, std::string_view operation, const std::string& problem,
           const std::vector<std::string>& entries, std::string_view requirement) {
  const auto hash = static_cast<int64_t>(fnv1a(entries));
  at::Tensor votes = at::empty({3}, at::TensorOptions().dtype(at::kLong));
  auto* vote = votes.data_ptr<int64_t>();
  vote[0] = problem.empty() ? 0 : 1;
  vote[1] = hash;
  vote[2] = ~hash;
  AllReduceOptions max;
  max.op = ReduceOp::Max;
  group.all_reduce(votes, max);
  // Max of h and of ~h (= -h-1) give back this rank's h only if all agree.
  const bool any_problem = vote[0] != 0;
  const bool same = vote[1] == hash && vote[2] == ~hash;
  if (!any_problem && same) return;

  // Something is wrong somewhere: every rank is here, so exchange details.
  c10::impl::GenericList mine(c10::StringType::get());
  mine.push_back(problem);
  for (const auto& entry : entries) mine.push_back(entry);
  const std::vector<c10::IValue> all = group.all_gather_object(mine);
  std::vector<std::vector<std::string>> views;
  for (const auto& view : all) {
    std::vector<std::string> strings;
    for (const auto& item : view.toListRef()) strings.push_back(item.toStringRef());
    views.push_back(std::move(strings));
  }
  constexpr std::size_t kShown = 3;
  std::string message = detail::where() + " " + std::string(operation) + ": ";
  if (any_problem) {
    // Ranks with the same problem are listed together.
    std::vector<std::pair<std::string, std::vector<int>>> problems;
    for (std::size_t r = 0; r < views.size(); ++r) {
      const std::string& text = views[r].front();
      if (text.empty()) continue;
      auto found = std::find_if(problems.begin(), problems.end(), [&](const auto& p) { return p.first == text; });
      if (found == problems.end()) found = problems.insert(problems.end(), {text, {}});
      found->second.push_back(static_cast<int>(r));
    }
    message += "invalid input";
    for (std::size_t i = 0; i < problems.size() && i < kShown; ++i) {
      const auto& [text, ranks] = problems[i];
      std::string where_text;
      if (ranks.size() == views.size() && views.size() > 1) {
        where_text = "every rank";
      } else {
        where_text = ranks.size() > 1 ? "ranks " : "rank ";
        for (std::size_t k = 0; k < ranks.size(); ++k) where_text += (k ? ", " : "") + std::to_string(ranks[k]);
      }
      message += (i ? "; on " : " on ") + where_text + ": " + text;
    }
    if (problems.size() > kShown) message += "; and " + std::to_string(problems.size() - kShown) + " more problems";
    throw ConfigError(message + ".");
  }
  message += "the ranks passed different inputs: ";
  std::size_t shown = 0;
  const auto& reference = views.front();
  for (std::size_t r = 1; r < views.size() && shown < kShown; ++r) {
    const auto& other = views[r];
    if (other == reference) continue;
    std::size_t i = 1;
    while (i < other.size() && i < reference.size() && other[i] == reference[i]) ++i;
    message += (shown > 0 ? "; rank " : "rank ") + std::to_string(r) + " has " +
               (i < other.size() ? "'" + other[i] + "'" : std::string("nothing more")) + " where rank 0 has " +
               (i < reference.size() ? "'" + reference[i] + "'" : std::string("nothing more"));
    ++shown;
  }
  throw CollectiveMismatch(message + ". " + std::string(requirement));
}

// Runs one collective for the tensor at `path`, adding the path to the
// library's own errors so a failure says which tensor it concerned.
template <class Function>
auto at_path(std::string_view operation, const std::string& path, Function&& function) {
  try {
    return function();
  } catch (const ConfigError& error) {
    throw ConfigError(std::string(error.what()) + " [" + std::string(operation) + ", tensor " + path + "]");
  } catch (const CollectiveMismatch& error) {
    throw CollectiveMismatch(std::string(error.what()) + " [" + std::string(operation) + ", tensor " + path + "]");
  }
}

std::string device_type(const at::Tensor& tensor) { return c10::DeviceTypeName(tensor.device().type(), true); }

// --- listify ---------------------------------------------------------------------------

c10::IValue tensor_to_list(const at::Tensor& tensor, const std::string& path) {
  at::Tensor values = tensor.detach().to(at::kCPU);
  const c10::ScalarType type = values.scalar_type();
  c10::TypePtr scalar_type;
  if (type == at::kBool) {
    scalar_type = c10::BoolType::get();
  } else if (at::isComplexType(type)) {
    values = values.to(at::kComplexDouble);
    scalar_type = c10::ComplexType::get();
  } else if (at::isFloatingType(type)) {
    values = values.to(at::kDouble);
    scalar_type = c10::FloatType::get();
  } else if (at::isIntegralType(type, /*includeBool=*/false)) {
    values = values.to(at::kLong);
    scalar_type = c10::IntType::get();
  } else {
    throw ConfigError(detail::where() + " listify: " + path + " has dtype " + dtype_name(type) +
                      ", which has no Python number type; convert it to a numeric dtype first.");
  }
  values = values.contiguous();
  const auto element = [&](int64_t index) -> c10::IValue {
    switch (values.scalar_type()) {
      case at::kBool: return values.data_ptr<bool>()[index];
      case at::kComplexDouble: return values.data_ptr<c10::complex<double>>()[index];
      case at::kDouble: return values.data_ptr<double>()[index];
      default: return values.data_ptr<int64_t>()[index];
    }
  };
  const int64_t dims = values.dim();
  if (dims == 0) return element(0);
  // element_types[d]: type of the elements of a list at dimension d.
  std::vector<c10::TypePtr> element_types(static_cast<std::size_t>(dims));
  element_types.back() = scalar_type;
  for (int64_t d = dims - 2; d >= 0; --d) {
    element_types[static_cast<std::size_t>(d)] = c10::ListType::create(element_types[static_cast<std::size_t>(d + 1)]);
  }
  const auto strides = values.strides();
  const std::function<c10::IValue(int64_t, int64_t)> build = [&](int64_t d, int64_t offset) -> c10::IValue {
    c10::impl::GenericList list(element_types[static_cast<std::size_t>(d)]);
    const int64_t count = values.size(d);
    list.reserve(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      const int64_t position = offset + i * strides[d];
      list.push_back(d == dims - 1 ? element(position) : build(d + 1, position));
    }
    return list;
  };
  return build(0, 0);
}

// --- concatenate -------------------------------------------------------------------------

std::string without_final_period(std::string text) {
  while (!text.empty() && (text.back() == '.' || text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// `items[j]` seen at `sub` (a path below "data[j]").
std::string item_path(std::size_t item, const std::string& sub) { return index_path(kRoot, item) + sub; }

c10::IValue concatenate_at(const std::vector<c10::IValue>& items, const std::string& sub, int64_t dim) {
  const c10::IValue& first = items.front();
  const auto mismatch = [&](std::size_t j, const std::string& what) {
    return ConfigError(detail::where() + " concatenate: " + item_path(j, sub) + " " + what + " where " +
                       item_path(0, sub) + " is " +
                       (first.isTensor() ? std::string("a tensor") : leaf_description(first)) +
                       ". Every element of data must have the structure of data[0].");
  };
  if (first.isList() || first.isTuple()) {
    const bool list = first.isList();
    const auto length = list ? first.toListRef().size() : first.toTupleRef().elements().size();
    std::vector<c10::IValue> merged;
    for (std::size_t i = 0; i < length; ++i) {
      std::vector<c10::IValue> column;
      for (std::size_t j = 0; j < items.size(); ++j) {
        const c10::IValue& item = items[j];
        const bool same_kind = list ? item.isList() : item.isTuple();
        const auto size = !same_kind ? 0 : (list ? item.toListRef().size() : item.toTupleRef().elements().size());
        if (!same_kind || size != length) {
          throw mismatch(j, same_kind ? "has " + std::to_string(size) + " elements, not " + std::to_string(length)
                                      : "is " + leaf_description(item));
        }
        column.push_back(list ? item.toListRef()[i] : item.toTupleRef().elements()[i]);
      }
      merged.push_back(concatenate_at(column, index_path(sub, i), dim));
    }
    if (list) return build_list(std::move(merged), first.toList().elementType());
    return c10::ivalue::Tuple::create(std::move(merged));
  }
  if (first.isGenericDict()) {
    const auto dict = first.toGenericDict();
    std::vector<std::pair<c10::IValue, c10::IValue>> merged;
    for (const auto& entry : dict) {
      std::vector<c10::IValue> column;
      for (std::size_t j = 0; j < items.size(); ++j) {
        if (!items[j].isGenericDict()) throw mismatch(j, "is " + leaf_description(items[j]));
        const auto other = items[j].toGenericDict();
        const auto found = other.find(entry.key());
        if (found == other.end()) {
          throw mismatch(j, "has no key " + key_path("", entry.key()));
        }
        column.push_back(found->value());
      }
      merged.emplace_back(entry.key(), concatenate_at(column, key_path(sub, entry.key()), dim));
    }
    return build_dict(dict.keyType(), std::move(merged), dict.valueType());
  }
  if (!first.isTensor()) {
    throw ConfigError(detail::where() + " concatenate: " + item_path(0, sub) + " is " + leaf_description(first) +
                      "; only tensors can be concatenated. " + std::string(kTensorsOnly) + ".");
  }
  std::vector<at::Tensor> tensors;
  for (std::size_t j = 0; j < items.size(); ++j) {
    if (!items[j].isTensor()) throw mismatch(j, "is " + leaf_description(items[j]));
    tensors.push_back(items[j].toTensor());
  }
  try {
    return at::cat(tensors, dim);
  } catch (const c10::Error& error) {
    std::string shapes;
    for (std::size_t j = 0; j < tensors.size(); ++j) {
      shapes += (j ? ", " : "") + item_path(j, sub) + " " + dtype_name(tensors[j].scalar_type()) + " " +
                sizes_text(tensors[j].sizes(), false);
    }
    throw ConfigError(detail::where() + " concatenate: cannot concatenate along dim " + std::to_string(dim) + " (" +
                      shapes + "): " + without_final_period(error.what_without_backtrace()) +
                      ". All sizes but the concatenated one must match.");
  }
}

enum class Reduction { Mean, Sum, None };

std::optional<Reduction> parse_reduction(std::string_view text) {
  if (text == "mean") return Reduction::Mean;
  if (text == "sum") return Reduction::Sum;
  if (text == "none") return Reduction::None;
  return std::nullopt;
}

}  // namespace

// --- natural types ------------------------------------------------------------------------------

namespace detail {

void throw_not_convertible(const c10::IValue& value, std::string_view wanted) {
  throw ConfigError(where() + " from_ivalue: cannot convert " +
                    (value.isTensor() ? std::string("a tensor") : leaf_description(value)) + " to " +
                    std::string(wanted) + "; the value does not have the requested C++ type's shape.");
}

c10::IValue make_list(std::vector<c10::IValue> elements) { return build_list(std::move(elements), nullptr); }

c10::IValue make_string_dict(std::vector<std::pair<std::string, c10::IValue>> items) {
  std::vector<std::pair<c10::IValue, c10::IValue>> converted;
  converted.reserve(items.size());
  for (auto& [key, value] : items) converted.emplace_back(c10::IValue(std::move(key)), std::move(value));
  return build_dict(c10::StringType::get(), std::move(converted), nullptr);
}

c10::ArrayRef<c10::IValue> list_elements(const c10::IValue& list, std::string_view wanted) {
  if (!list.isList()) throw_not_convertible(list, wanted);
  return list.toListRef();
}

}  // namespace detail

// --- recursively_apply -------------------------------------------------------------------------

bool is_tensor(const c10::IValue& leaf) { return leaf.isTensor(); }

c10::IValue recursively_apply(const LeafFunction& func, const c10::IValue& data, const ApplyOptions& options) {
  const bool default_test = !options.test_type;
  return rebuild(data, kRoot, [&](const c10::IValue& leaf, const std::string& path) -> c10::IValue {
    if (default_test ? leaf.isTensor() : options.test_type(leaf)) return func(leaf);
    if (options.error_on_other_type) {
      throw ConfigError(detail::where() + " recursively_apply: " + path + " is " + leaf_description(leaf) + ", " +
                        (default_test ? std::string("not a tensor. ") + std::string(kTensorsOnly)
                                      : std::string("which test_type rejects. Pass only leaves test_type accepts")) +
                        ", or leave error_on_other_type false to keep such leaves.");
    }
    return leaf;
  });
}

// --- collectives -------------------------------------------------------------------------------

c10::IValue gather(ProcessGroup& group, const c10::IValue& data) {
  // Every dimension but the first, the dtype and the device must agree.
  Inventory inventory = take_inventory(data, [](const at::Tensor& tensor) {
    const std::vector<int64_t> sizes = tensor.dim() == 0
                                           ? std::vector<int64_t>{1}
                                           : std::vector<int64_t>(tensor.sizes().begin(), tensor.sizes().end());
    return "Tensor " + dtype_name(tensor.scalar_type()) + " " + sizes_text(sizes, true) + " on " + device_type(tensor);
  });
  agree(group, "gather", inventory.problem, inventory.entries,
        "Every rank must pass the same structure, with tensors of the same dtype, device and sizes except the "
        "first.");
  std::vector<at::Tensor> gathered;
  gathered.reserve(inventory.tensors.size());
  for (std::size_t i = 0; i < inventory.tensors.size(); ++i) {
    const at::Tensor& tensor = inventory.tensors[i];
    const at::Tensor input = (tensor.dim() == 0 ? tensor.reshape({1}) : tensor).contiguous();
    gathered.push_back(at_path("gather", inventory.paths[i], [&] { return group.all_gather_varying(input); }));
  }
  return replace_tensors(data, gathered);
}

std::vector<c10::IValue> gather_object(ProcessGroup& group, const c10::IValue& object) {
  std::vector<c10::IValue> result;
  for (const auto& part : group.all_gather_object(object)) {
    if (part.isList()) {
      for (const auto& element : part.toListRef()) result.push_back(element);
    } else {
      result.push_back(part);
    }
  }
  return result;
}

c10::IValue broadcast(ProcessGroup& group, const c10::IValue& data, int from_process) {
  Inventory inventory = take_inventory(data, [](const at::Tensor& tensor) {
    return "Tensor " + dtype_name(tensor.scalar_type()) + " " + sizes_text(tensor.sizes(), false) + " on " +
           device_type(tensor);
  });
  inventory.entries.insert(inventory.entries.begin(), "from_process=" + std::to_string(from_process));
  if (from_process < 0 || from_process >= group.size()) {
    inventory.problem = "from_process " + std::to_string(from_process) + " is not a rank of group '" + group.name() +
                        "' (0.." + std::to_string(group.size() - 1) + "). Pass the rank that holds the data";
  }
  agree(group, "broadcast", inventory.problem, inventory.entries,
        "Every rank must pass the same from_process and the same structure, with tensors of the same dtype, device "
        "and shape.");
  std::vector<at::Tensor> received;
  received.reserve(inventory.tensors.size());
  BroadcastOptions options;
  options.root = from_process;
  const bool root = group.rank() == from_process;
  for (std::size_t i = 0; i < inventory.tensors.size(); ++i) {
    const at::Tensor& tensor = inventory.tensors[i];
    at::Tensor buffer = root ? tensor.contiguous() : at::empty(tensor.sizes(), tensor.options());
    at_path("broadcast", inventory.paths[i], [&] {
      group.broadcast(buffer, options);
      return 0;
    });
    received.push_back(root ? tensor : buffer);
  }
  return replace_tensors(data, received);
}

std::vector<c10::IValue>& broadcast_object_list(ProcessGroup& group, std::vector<c10::IValue>& object_list,
                                                int from_process) {
  std::string problem;
  if (from_process < 0 || from_process >= group.size()) {
    problem = "from_process " + std::to_string(from_process) + " is not a rank of group '" + group.name() + "' (0.." +
              std::to_string(group.size() - 1) + "). Pass the rank that holds the objects";
  }
  agree(group, "broadcast_object_list", problem, {"from_process=" + std::to_string(from_process)},
        "Every rank must pass the same from_process.");
  const bool root = group.rank() == from_process;
  c10::IValue packed = root ? detail::make_list(object_list) : c10::IValue();
  group.broadcast_object(packed, from_process);
  if (!root) {
    const auto received = packed.toListRef();
    object_list.assign(received.begin(), received.end());
  }
  return object_list;
}

c10::IValue reduce(ProcessGroup& group, const c10::IValue& data, std::string_view reduction, double scale) {
  const std::optional<Reduction> mode = parse_reduction(reduction);
  Inventory inventory = take_inventory(data, [](const at::Tensor& tensor) {
    return "Tensor " + dtype_name(tensor.scalar_type()) + " " + sizes_text(tensor.sizes(), false) + " on " +
           device_type(tensor);
  });
  inventory.entries.insert(inventory.entries.begin(), "reduction=" + std::string(reduction));
  if (!mode) {
    inventory.problem = "reduction \"" + std::string(reduction) + "\" is not one of \"mean\", \"sum\", \"none\"";
  } else if (*mode == Reduction::Mean) {
    for (std::size_t i = 0; i < inventory.tensors.size(); ++i) {
      const c10::ScalarType type = inventory.tensors[i].scalar_type();
      if (!at::isFloatingType(type) && !at::isComplexType(type)) {
        inventory.note_problem(inventory.paths[i] + " is a tensor of dtype " + dtype_name(type) +
                                   ", and reduction \"mean\" needs floating-point tensors",
                               "Use reduction \"sum\", or convert the tensor to a floating-point dtype first");
      }
    }
  }
  agree(group, "reduce", inventory.problem, inventory.entries,
        "Every rank must pass the same reduction and the same structure, with tensors of the same dtype, device and "
        "shape.");
  std::vector<at::Tensor> reduced;
  reduced.reserve(inventory.tensors.size());
  AllReduceOptions sum;
  sum.op = ReduceOp::Sum;
  for (std::size_t i = 0; i < inventory.tensors.size(); ++i) {
    at::Tensor tensor = inventory.tensors[i];
    if (*mode != Reduction::None) {
      tensor = tensor.clone(at::MemoryFormat::Contiguous);
      at_path("reduce", inventory.paths[i], [&] {
        group.all_reduce(tensor, sum);
        return 0;
      });
      if (*mode == Reduction::Mean) tensor.div_(group.size());
    }
    if (scale != 1.0) tensor = tensor.mul(scale);
    reduced.push_back(tensor);
  }
  return replace_tensors(data, reduced);
}

c10::IValue pad_across_processes(ProcessGroup& group, const c10::IValue& data, int64_t dim, const at::Scalar& pad_index,
                                 bool pad_first) {
  // Only the structure and the number of dimensions matter: the sizes along
  // `dim` are what the ranks exchange.
  Inventory inventory = take_inventory(data, [](const at::Tensor& tensor) {
    return "Tensor with " + std::to_string(tensor.dim()) + " dims";
  });
  inventory.entries.insert(inventory.entries.begin(), "dim=" + std::to_string(dim));
  agree(group, "pad_across_processes", inventory.problem, inventory.entries,
        "Every rank must pass the same dim and the same structure, with tensors of the same number of dimensions.");
  const auto count = static_cast<int64_t>(inventory.tensors.size());
  if (count == 0) return replace_tensors(data, {});
  // Size along the padded dimension per tensor; -1 where the tensor has no
  // such dimension (left as it is).
  std::vector<int64_t> axes;
  at::Tensor sizes = at::empty({count}, at::TensorOptions().dtype(at::kLong));
  auto* size = sizes.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const at::Tensor& tensor = inventory.tensors[static_cast<std::size_t>(i)];
    const int64_t axis = dim < 0 ? dim + tensor.dim() : dim;
    const bool valid = axis >= 0 && axis < tensor.dim();
    axes.push_back(valid ? axis : -1);
    size[i] = valid ? tensor.size(axis) : -1;
  }
  AllReduceOptions max;
  max.op = ReduceOp::Max;
  group.all_reduce(sizes, max);
  std::vector<at::Tensor> padded;
  padded.reserve(inventory.tensors.size());
  for (int64_t i = 0; i < count; ++i) {
    const at::Tensor& tensor = inventory.tensors[static_cast<std::size_t>(i)];
    const int64_t axis = axes[static_cast<std::size_t>(i)];
    if (axis < 0 || tensor.size(axis) == size[i]) {
      padded.push_back(tensor);
      continue;
    }
    std::vector<int64_t> new_sizes(tensor.sizes().begin(), tensor.sizes().end());
    new_sizes[static_cast<std::size_t>(axis)] = size[i];
    at::Tensor result = at::full(new_sizes, pad_index, tensor.options());
    const int64_t old_size = tensor.size(axis);
    result.narrow(axis, pad_first ? size[i] - old_size : 0, old_size).copy_(tensor);
    padded.push_back(result);
  }
  return replace_tensors(data, padded);
}

// --- local operations ----------------------------------------------------------------------------

c10::IValue concatenate(const std::vector<c10::IValue>& data, int64_t dim) {
  if (data.empty()) {
    throw ConfigError(detail::where() +
                      " concatenate: data is empty; pass a list of at least one structure to concatenate.");
  }
  return concatenate_at(data, "", dim);
}

c10::IValue send_to_device(const c10::IValue& data, const c10::Device& device, bool non_blocking,
                           const std::vector<std::string>& skip_keys) {
  const std::set<std::string> skipped(skip_keys.begin(), skip_keys.end());
  return rebuild(
      data, kRoot,
      [&](const c10::IValue& leaf, const std::string&) -> c10::IValue {
        if (!leaf.isTensor() || !leaf.toTensor().defined()) return leaf;
        const at::Tensor& tensor = leaf.toTensor();
        return tensor.to(device, tensor.scalar_type(), non_blocking);
      },
      &skipped);
}

c10::IValue slice_tensors(const c10::IValue& data, std::optional<int64_t> start, std::optional<int64_t> end,
                          int64_t step) {
  if (step < 1) {
    throw ConfigError(detail::where() + " slice_tensors: step " + std::to_string(step) +
                      " is not positive; tensors can only be sliced forwards.");
  }
  const c10::optional<int64_t> from = start ? c10::optional<int64_t>(*start) : c10::nullopt;
  const c10::optional<int64_t> to = end ? c10::optional<int64_t>(*end) : c10::nullopt;
  return rebuild(data, kRoot, [&](const c10::IValue& leaf, const std::string& path) -> c10::IValue {
    if (!leaf.isTensor()) return leaf;
    const at::Tensor& tensor = leaf.toTensor();
    if (tensor.dim() == 0) {
      throw ConfigError(detail::where() + " slice_tensors: " + path +
                        " is a 0-d tensor, which has no dimension to slice; give it a batch dimension first.");
    }
    return tensor.slice(0, from, to, step);
  });
}

c10::IValue convert_to_fp32(const c10::IValue& data) {
  return rebuild(data, kRoot, [](const c10::IValue& leaf, const std::string&) -> c10::IValue {
    if (!leaf.isTensor()) return leaf;
    const at::Tensor& tensor = leaf.toTensor();
    if (!tensor.defined()) return leaf;
    const c10::ScalarType type = tensor.scalar_type();
    return (type == at::kHalf || type == at::kBFloat16) ? tensor.to(at::kFloat) : tensor;
  });
}

c10::IValue listify(const c10::IValue& data) {
  return rebuild(data, kRoot, [](const c10::IValue& leaf, const std::string& path) -> c10::IValue {
    return leaf.isTensor() ? tensor_to_list(leaf.toTensor(), path) : leaf;
  });
}

int64_t find_batch_size(const c10::IValue& data) {
  std::optional<std::pair<at::Tensor, std::string>> first;
  visit(data, kRoot, [&](const c10::IValue& node, const std::string& path) {
    if (!first && node.isTensor()) first.emplace(node.toTensor(), path);
  });
  if (!first) {
    throw ConfigError(detail::where() + " find_batch_size: data (" + type_name(data) +
                      ") holds no tensor; pass a batch with at least one tensor, whose first dimension is the "
                      "batch size.");
  }
  const auto& [tensor, path] = *first;
  if (!tensor.defined() || tensor.dim() == 0) {
    throw ConfigError(detail::where() + " find_batch_size: the first tensor, " + path + ", is " +
                      (tensor.defined() ? "0-d" : "undefined") +
                      " and has no batch dimension; put a tensor with a batch dimension first.");
  }
  return tensor.size(0);
}

}  // namespace accelerate
