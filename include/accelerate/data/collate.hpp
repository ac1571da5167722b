// Turning loaded samples into the batches a loader hands out (torch's
// collate_fn and default_collate), and placing a batch on its device (the
// seeds' send_to_device): stacking each field of the samples along a new
// first dimension, for the structures LibTorch datasets return.
//
//   Sample                                 Batch
//   at::Tensor                             at::Tensor [n, ...]
//   torch::data::Example<>                 Example<> {data [n, ...], target [n, ...]}
//   std::map<std::string, at::Tensor>      the same keys, each stacked
//   c10::Dict<std::string, at::Tensor>     the same keys, each stacked
//   std::tuple<...>, std::pair<...>        each element collated by these rules
//   c10::IValue                            a tensor, tuple, list or string-keyed dict of
//                                          these, collated by these rules; numbers become
//                                          a tensor of n numbers, strings a list of n strings
//
// A loader takes any callable from std::vector<Sample> to a batch instead
// (its collate function); DefaultCollate is the default.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "accelerate/data/example_fwd.hpp"

namespace accelerate {
namespace detail {

/// Throws ConfigError "<where> <component>: <what>".
[[noreturn]] void loader_error(std::string_view component, const std::string& what);

// The collate rules, one per sample structure. `field` names the part of the
// sample being collated ("" for the whole sample, "data", "['image']",
// "element 1"), for the error that names the first sample that differs.
at::Tensor collate_field(std::vector<at::Tensor>& samples, const std::string& field);
TensorExample collate_field(std::vector<TensorExample>& samples, const std::string& field);
std::map<std::string, at::Tensor> collate_field(std::vector<std::map<std::string, at::Tensor>>& samples,
                                                const std::string& field);
c10::Dict<std::string, at::Tensor> collate_field(std::vector<c10::Dict<std::string, at::Tensor>>& samples,
                                                 const std::string& field);
c10::IValue collate_field(std::vector<c10::IValue>& samples, const std::string& field);
template <class... Elements>
auto collate_field(std::vector<std::tuple<Elements...>>& samples, const std::string& field);
template <class First, class Second>
auto collate_field(std::vector<std::pair<First, Second>>& samples, const std::string& field);

/// "<field> element <i>", the name of a tuple's element for errors.
std::string element_field(const std::string& field, std::size_t index);

template <std::size_t I, class Tuple>
auto collate_element(std::vector<Tuple>& samples, const std::string& field) {
  using Element = std::tuple_element_t<I, Tuple>;
  std::vector<Element> column;
  column.reserve(samples.size());
  for (Tuple& sample : samples) column.push_back(std::move(std::get<I>(sample)));
  return collate_field(column, element_field(field, I));
}

template <class... Elements>
auto collate_field(std::vector<std::tuple<Elements...>>& samples, const std::string& field) {
  if (samples.empty()) loader_error("collate", "a batch needs at least one sample.");
  return [&]<std::size_t... I>(std::index_sequence<I...>) { return std::tuple{collate_element<I>(samples, field)...}; }
  (std::index_sequence_for<Elements...>{});
}

template <class First, class Second>
auto collate_field(std::vector<std::pair<First, Second>>& samples, const std::string& field) {
  if (samples.empty()) loader_error("collate", "a batch needs at least one sample.");
  return std::pair{collate_element<0>(samples, field), collate_element<1>(samples, field)};
}

}  // namespace detail

/// Whether DefaultCollate knows how to batch samples of type `Sample`.
template <class Sample>
concept DefaultCollatable = requires(std::vector<Sample>& samples, const std::string& field) {
  detail::collate_field(samples, field);
};

/// torch's default_collate for the sample structures in the table above.
/// Throws ConfigError naming the first sample whose field differs in shape
/// or dtype (or, for maps, in its keys) from sample 0's.
struct DefaultCollate {
  template <DefaultCollatable Sample>
  auto operator()(std::vector<Sample> samples) const {
    return detail::collate_field(samples, std::string());
  }
};

namespace detail {

/// Stacks the data and the targets of the examples along a new first
/// dimension. Throws ConfigError naming the first example whose shape or
/// dtype differs from the first one's.
TensorExample stack_examples(std::vector<TensorExample>& examples);

/// Where and how a batch's tensors go: for a CUDA device, pin_memory first
/// moves host tensors into page-locked memory and non_blocking lets the copy
/// overlap the host.
struct BatchPlacement {
  c10::Device device;
  bool non_blocking = false;
  bool pin_memory = false;
};

// The batch on the placement's device, for each collated structure.
at::Tensor place_on(at::Tensor tensor, const BatchPlacement& where);
TensorExample place_on(TensorExample batch, const BatchPlacement& where);
std::map<std::string, at::Tensor> place_on(std::map<std::string, at::Tensor> batch, const BatchPlacement& where);
c10::Dict<std::string, at::Tensor> place_on(c10::Dict<std::string, at::Tensor> batch, const BatchPlacement& where);
c10::IValue place_on(c10::IValue batch, const BatchPlacement& where);
template <class... Elements>
std::tuple<Elements...> place_on(std::tuple<Elements...> batch, const BatchPlacement& where);
template <class First, class Second>
std::pair<First, Second> place_on(std::pair<First, Second> batch, const BatchPlacement& where);

/// Another type (a collate function's own): moved with its to(device,
/// non_blocking) where it has one, else handed out as the collate function
/// returned it (the seeds' send_to_device leaves such objects alone too).
template <class Batch>
Batch place_on(Batch batch, const BatchPlacement& where) {
  if constexpr (requires {
                  { batch.to(where.device, where.non_blocking) } -> std::convertible_to<Batch>;
                }) {
    if (!where.device.is_cpu()) return batch.to(where.device, where.non_blocking);
  }
  return batch;
}

template <class... Elements>
std::tuple<Elements...> place_on(std::tuple<Elements...> batch, const BatchPlacement& where) {
  if (where.device.is_cpu()) return batch;
  return std::apply([&](auto&... element) { return std::tuple<Elements...>{place_on(std::move(element), where)...}; },
                    batch);
}

template <class First, class Second>
std::pair<First, Second> place_on(std::pair<First, Second> batch, const BatchPlacement& where) {
  if (where.device.is_cpu()) return batch;
  return {place_on(std::move(batch.first), where), place_on(std::move(batch.second), where)};
}

/// The batch on `device` (see BatchPlacement); on the CPU it is returned as it is.
template <class Batch>
Batch place_batch(Batch batch, const c10::Device& device, bool non_blocking, bool pin_memory) {
  if (device.is_cpu()) return batch;
  return place_on(std::move(batch), BatchPlacement{device, non_blocking, pin_memory});
}

}  // namespace detail
}  // namespace accelerate
