// Operations on nested structures of tensors (Accelerate's
// accelerate.utils.operations): gather, gather_object, broadcast,
// broadcast_object_list, reduce, pad_across_processes, concatenate,
// recursively_apply, send_to_device, slice_tensors, convert_to_fp32,
// listify, find_batch_size.
//
// The nested type is c10::IValue: tensors, lists, tuples, dicts (string keys
// are what the operations expect; other keys are carried along), strings,
// numbers, bools and None. Each operation has one IValue implementation.
// Thin templates accept the natural C++ spellings and give back the same
// type when the result has the input's shape:
//
//   at::Tensor, c10::IValue, std::string, int, int64_t, float, double, bool,
//   std::vector<T>, std::map<std::string, T>, std::tuple<T...>   (nested freely)
//
//   std::map<std::string, at::Tensor> batch = ...;
//   auto all = accelerate::gather(*group, batch);          // same map type
//   auto loss = accelerate::reduce(*group, loss_tensor);   // mean over ranks
//
// Collective operations (gather, gather_object, broadcast,
// broadcast_object_list, reduce, pad_across_processes) take the group
// explicitly and must be called by every rank of it. Before moving data they
// agree on the input: one small all-reduce compares a fingerprint of each
// rank's structure (nesting, keys, dtypes, the shapes the operation needs)
// and whether the input was valid. A bad input on any rank raises
// ConfigError on every rank, and ranks passing different structures raise
// CollectiveMismatch on every rank; both name the offending path, such as
// data['labels'][2]. The group stays usable afterwards.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/Scalar.h>

#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "accelerate/comm/process_group.hpp"

namespace accelerate {

// --- recursively_apply --------------------------------------------------------

/// Function applied to the leaves selected by ApplyOptions::test_type.
using LeafFunction = std::function<c10::IValue(const c10::IValue& leaf)>;
/// Selects the leaves a LeafFunction applies to (containers are always descended).
using LeafTest = std::function<bool(const c10::IValue& leaf)>;

/// The default LeafTest: the leaf is a tensor.
bool is_tensor(const c10::IValue& leaf);

struct ApplyOptions {
  /// Leaves to apply the function to; empty means is_tensor.
  LeafTest test_type;
  /// Raise ConfigError on a leaf that test_type rejects, instead of keeping it.
  bool error_on_other_type = false;
};

/// A copy of `data` with `func` applied to every selected leaf. Lists,
/// tuples and dicts are rebuilt (new containers, same keys and order);
/// leaves that are not selected are kept as they are.
c10::IValue recursively_apply(const LeafFunction& func, const c10::IValue& data, const ApplyOptions& options = {});

// --- collectives (every rank of `group` must call) ------------------------------

/// Every tensor gathered from all ranks and concatenated along dim 0 in rank
/// order; the result is on every rank. First dimensions may differ between
/// ranks; the other dimensions and dtypes must agree. A 0-d tensor counts as
/// [1]. Non-tensor leaves are a ConfigError.
c10::IValue gather(ProcessGroup& group, const c10::IValue& data);

/// The objects of all ranks, in rank order, on every rank. A list is
/// flattened into the result (Accelerate's gather_object of lists); any
/// other object contributes one element. Objects travel pickled over MPI.
std::vector<c10::IValue> gather_object(ProcessGroup& group, const c10::IValue& object);

/// Every tensor of `from_process`'s `data`, delivered to all ranks. All ranks
/// pass the same structure, shapes and dtypes. The inputs are not modified:
/// the root's result shares its tensors, the others get new ones.
c10::IValue broadcast(ProcessGroup& group, const c10::IValue& data, int from_process = 0);

/// Replaces `object_list` on every rank with `from_process`'s list (resized
/// to its length) and returns it. Objects travel pickled over MPI.
std::vector<c10::IValue>& broadcast_object_list(ProcessGroup& group, std::vector<c10::IValue>& object_list,
                                                int from_process = 0);

/// Every tensor summed over the ranks ("sum"), averaged ("mean": the sum
/// divided by the group size; floating-point tensors only) or left alone
/// ("none": the input tensors themselves), then multiplied by `scale` when
/// it is not 1. Shapes and dtypes must agree across ranks. Collective for
/// every reduction, "none" included.
c10::IValue reduce(ProcessGroup& group, const c10::IValue& data, std::string_view reduction = "mean",
                   double scale = 1.0);

/// Every tensor padded along `dim` (negative counts from the end) to the
/// largest size any rank has there, with `pad_index`, after the data or
/// before it (`pad_first`). Tensors with too few dimensions, and tensors
/// already of the largest size, are returned as they are.
c10::IValue pad_across_processes(ProcessGroup& group, const c10::IValue& data, int64_t dim = 0,
                                 const at::Scalar& pad_index = 0, bool pad_first = false);

// --- local operations -------------------------------------------------------------

/// The structures of `data` merged into one, their tensors concatenated
/// along `dim`. The first element gives the structure; every element must
/// have it.
c10::IValue concatenate(const std::vector<c10::IValue>& data, int64_t dim = 0);

/// Every tensor moved to `device` (Tensor::to; a tensor already there is
/// returned as is). Values under dict keys listed in `skip_keys` are left
/// untouched, at any depth.
c10::IValue send_to_device(const c10::IValue& data, const c10::Device& device, bool non_blocking = false,
                           const std::vector<std::string>& skip_keys = {});

/// Every tensor sliced along dim 0 like Python's tensor[start:end:step]
/// (negative indices count from the end, nullopt is open). Views, not
/// copies. A 0-d tensor is a ConfigError; other leaves are kept.
c10::IValue slice_tensors(const c10::IValue& data, std::optional<int64_t> start, std::optional<int64_t> end,
                          int64_t step = 1);

/// Every float16 and bfloat16 tensor converted to float32; everything else kept.
c10::IValue convert_to_fp32(const c10::IValue& data);

/// Every tensor replaced by nested lists of numbers (int for integer dtypes,
/// float for floating ones, bool, complex), as Tensor.tolist(); a 0-d tensor
/// becomes a single number. Other leaves are kept.
c10::IValue listify(const c10::IValue& data);

/// size(0) of the first tensor found, depth first in order. ConfigError when
/// `data` holds no tensor or the first tensor is 0-d.
int64_t find_batch_size(const c10::IValue& data);

// --- natural C++ types ----------------------------------------------------------------

namespace detail {

/// Conversion of one natural C++ type to and from c10::IValue. Specialised
/// below for the supported types; not defined for the rest.
template <class T>
struct Nested;

[[noreturn]] void throw_not_convertible(const c10::IValue& value, std::string_view wanted);
/// A list, typed (List[Tensor], List[int], …) when the elements share a simple type.
c10::IValue make_list(std::vector<c10::IValue> elements);
/// A Dict[str, V], V as for make_list.
c10::IValue make_string_dict(std::vector<std::pair<std::string, c10::IValue>> items);
/// A list's elements (any element type).
c10::ArrayRef<c10::IValue> list_elements(const c10::IValue& list, std::string_view wanted);

template <>
struct Nested<c10::IValue> {
  static c10::IValue to(const c10::IValue& value) { return value; }
  static c10::IValue from(const c10::IValue& value) { return value; }
};

template <>
struct Nested<at::Tensor> {
  static c10::IValue to(const at::Tensor& value) { return value; }
  static at::Tensor from(const c10::IValue& value) {
    if (!value.isTensor()) throw_not_convertible(value, "at::Tensor");
    return value.toTensor();
  }
};

template <>
struct Nested<std::string> {
  static c10::IValue to(const std::string& value) { return value; }
  static std::string from(const c10::IValue& value) {
    if (!value.isString()) throw_not_convertible(value, "std::string");
    return value.toStringRef();
  }
};

template <>
struct Nested<bool> {
  static c10::IValue to(bool value) { return value; }
  static bool from(const c10::IValue& value) {
    if (!value.isBool()) throw_not_convertible(value, "bool");
    return value.toBool();
  }
};

/// Numbers: IValue stores int64_t and double; int and float convert.
template <class T, class Stored>
struct NestedNumber {
  static c10::IValue to(T value) { return static_cast<Stored>(value); }
  static T from(const c10::IValue& value) {
    const bool fits = std::is_same_v<Stored, int64_t> ? value.isInt() : value.isDouble();
    if (!fits) throw_not_convertible(value, std::is_same_v<Stored, int64_t> ? "an integer" : "a floating-point number");
    if constexpr (std::is_same_v<Stored, int64_t>) {
      return static_cast<T>(value.toInt());
    } else {
      return static_cast<T>(value.toDouble());
    }
  }
};
template <>
struct Nested<int> : NestedNumber<int, int64_t> {};
template <>
struct Nested<int64_t> : NestedNumber<int64_t, int64_t> {};
template <>
struct Nested<float> : NestedNumber<float, double> {};
template <>
struct Nested<double> : NestedNumber<double, double> {};

template <class T>
struct Nested<std::vector<T>> {
  static c10::IValue to(const std::vector<T>& values) {
    std::vector<c10::IValue> elements;
    elements.reserve(values.size());
    for (const auto& value : values) elements.push_back(Nested<T>::to(value));
    return make_list(std::move(elements));
  }
  static std::vector<T> from(const c10::IValue& value) {
    std::vector<T> result;
    for (const auto& element : list_elements(value, "std::vector")) result.push_back(Nested<T>::from(element));
    return result;
  }
};

template <class T>
struct Nested<std::map<std::string, T>> {
  static c10::IValue to(const std::map<std::string, T>& values) {
    std::vector<std::pair<std::string, c10::IValue>> items;
    items.reserve(values.size());
    for (const auto& [key, value] : values) items.emplace_back(key, Nested<T>::to(value));
    return make_string_dict(std::move(items));
  }
  static std::map<std::string, T> from(const c10::IValue& value) {
    if (!value.isGenericDict()) throw_not_convertible(value, "std::map<std::string, T>");
    std::map<std::string, T> result;
    for (const auto& entry : value.toGenericDict()) {
      if (!entry.key().isString()) throw_not_convertible(entry.key(), "a std::string map key");
      result.emplace(entry.key().toStringRef(), Nested<T>::from(entry.value()));
    }
    return result;
  }
};

template <class... T>
struct Nested<std::tuple<T...>> {
  static c10::IValue to(const std::tuple<T...>& values) {
    return std::apply(
        [](const auto&... value) {
          return c10::IValue(c10::ivalue::Tuple::create(std::vector<c10::IValue>{Nested<T>::to(value)...}));
        },
        values);
  }
  static std::tuple<T...> from(const c10::IValue& value) {
    if (!value.isTuple() || value.toTupleRef().elements().size() != sizeof...(T)) {
      throw_not_convertible(value, "a std::tuple of " + std::to_string(sizeof...(T)) + " elements");
    }
    const auto& elements = value.toTupleRef().elements();
    const auto convert = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple<T...>(Nested<T>::from(elements[I])...);
    };
    return convert(std::index_sequence_for<T...>{});
  }
};

}  // namespace detail

/// A type the operations accept: c10::IValue, at::Tensor, the scalars listed
/// above, and std::vector / std::map<std::string, …> / std::tuple of them.
template <class T>
concept Nestable = requires(const T& value, const c10::IValue& ivalue) {
  { detail::Nested<T>::to(value) } -> std::same_as<c10::IValue>;
  { detail::Nested<T>::from(ivalue) } -> std::same_as<T>;
};

template <Nestable T>
c10::IValue to_ivalue(const T& value) {
  return detail::Nested<T>::to(value);
}

/// ConfigError, naming both types, when `value` does not have T's shape.
template <Nestable T>
T from_ivalue(const c10::IValue& value) {
  return detail::Nested<T>::from(value);
}

/// recursively_apply over tensors with a function of a tensor. Returns the
/// input's type when `func` returns at::Tensor, c10::IValue otherwise.
template <Nestable T, class Func>
requires std::is_invocable_v<Func&, const at::Tensor&>
auto recursively_apply(Func&& func, const T& data, bool error_on_other_type = false) {
  using Result = std::decay_t<std::invoke_result_t<Func&, const at::Tensor&>>;
  const c10::IValue result =
      recursively_apply(LeafFunction([&func](const c10::IValue& leaf) {
                          if constexpr (Nestable<Result>) {
                            return to_ivalue(func(leaf.toTensor()));
                          } else {
                            return c10::IValue(func(leaf.toTensor()));
                          }
                        }),
                        to_ivalue(data), ApplyOptions{.test_type = {}, .error_on_other_type = error_on_other_type});
  if constexpr (std::is_same_v<Result, at::Tensor>) {
    return from_ivalue<T>(result);
  } else {
    return result;
  }
}

template <Nestable T>
T gather(ProcessGroup& group, const T& data) {
  return from_ivalue<T>(gather(group, to_ivalue(data)));
}

/// A vector's elements from all ranks, concatenated in rank order.
template <Nestable T>
std::vector<T> gather_object(ProcessGroup& group, const std::vector<T>& objects) {
  std::vector<T> result;
  for (const auto& object : gather_object(group, to_ivalue(objects))) result.push_back(from_ivalue<T>(object));
  return result;
}

/// One object per rank, in rank order.
template <Nestable T>
std::vector<T> gather_object(ProcessGroup& group, const T& object) {
  std::vector<T> result;
  // Wrapped in a list of one, so that exactly one element comes from each rank.
  for (const auto& element : gather_object(group, detail::make_list({to_ivalue(object)}))) {
    result.push_back(from_ivalue<T>(element));
  }
  return result;
}

template <Nestable T>
T broadcast(ProcessGroup& group, const T& data, int from_process = 0) {
  return from_ivalue<T>(broadcast(group, to_ivalue(data), from_process));
}

template <Nestable T>
std::vector<T>& broadcast_object_list(ProcessGroup& group, std::vector<T>& object_list, int from_process = 0) {
  std::vector<c10::IValue> objects;
  objects.reserve(object_list.size());
  for (const auto& object : object_list) objects.push_back(to_ivalue(object));
  broadcast_object_list(group, objects, from_process);
  object_list.clear();
  for (const auto& object : objects) object_list.push_back(from_ivalue<T>(object));
  return object_list;
}

template <Nestable T>
T reduce(ProcessGroup& group, const T& data, std::string_view reduction = "mean", double scale = 1.0) {
  return from_ivalue<T>(reduce(group, to_ivalue(data), reduction, scale));
}

template <Nestable T>
T pad_across_processes(ProcessGroup& group, const T& data, int64_t dim = 0, const at::Scalar& pad_index = 0,
                       bool pad_first = false) {
  return from_ivalue<T>(pad_across_processes(group, to_ivalue(data), dim, pad_index, pad_first));
}

template <Nestable T>
T concatenate(const std::vector<T>& data, int64_t dim = 0) {
  std::vector<c10::IValue> items;
  items.reserve(data.size());
  for (const auto& item : data) items.push_back(to_ivalue(item));
  return from_ivalue<T>(concatenate(items, dim));
}

template <Nestable T>
T send_to_device(const T& data, const c10::Device& device, bool non_blocking = false,
                 const std::vector<std::string>& skip_keys = {}) {
  return from_ivalue<T>(send_to_device(to_ivalue(data), device, non_blocking, skip_keys));
}

template <Nestable T>
T slice_tensors(const T& data, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) {
  return from_ivalue<T>(slice_tensors(to_ivalue(data), start, end, step));
}

template <Nestable T>
T convert_to_fp32(const T& data) {
  return from_ivalue<T>(convert_to_fp32(to_ivalue(data)));
}

template <Nestable T>
c10::IValue listify(const T& data) {
  return listify(to_ivalue(data));
}

template <Nestable T>
int64_t find_batch_size(const T& data) {
  return find_batch_size(to_ivalue(data));
}

}  // namespace accelerate
