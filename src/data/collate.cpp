#include "accelerate/data/collate.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <utility>

#include "accelerate/error.hpp"

namespace accelerate::detail {

namespace {

std::string describe(const at::Tensor& tensor) {
  if (!tensor.defined()) return "an undefined tensor";
  std::ostringstream text;
  text << tensor.sizes() << " " << tensor.scalar_type();
  return text.str();
}

std::string join(const std::string& field, const std::string& part) {
  return field.empty() ? part : field + " " + part;
}

// "the sample", "the sample's data", for messages about one field.
std::string field_of_sample(const std::string& field) { return field.empty() ? "the sample" : field; }

void check_not_empty(std::size_t samples) {
  if (samples == 0) loader_error("collate", "a batch needs at least one sample.");
}

[[noreturn]] void differs(std::size_t index, const std::string& field, const std::string& mine,
                          const std::string& first, const std::string& advice) {
  loader_error("collate", "sample " + std::to_string(index) + " of the batch has " +
                              (field.empty() ? "" : field + " ") + mine + ", but sample 0 has " + first + ". " +
                              advice);
}

constexpr const char* kSameShape =
    "A batch stacks its samples, so every sample's field must have the same shape and dtype; pad or resize the "
    "samples in the dataset's get(), or give the loader a collate function that does.";

// Named tensors (LibTorch 1.x; later versions have no names to keep).
template <class Tensor>
bool has_names(const Tensor& tensor) {
  if constexpr (requires { tensor.has_names(); }) {
    return tensor.has_names();
  } else {
    return false;
  }
}

// The samples copied side by side into one new tensor, or an undefined
// tensor where torch::stack must do it. torch::stack is an operator call per
// sample (an unsqueeze each for 0-d samples, then cat); samples that are
// plain, contiguous CPU tensors of one dtype and shape need only one
// allocation and a memcpy each, and give the same result. Autograd, lazy
// conjugation or negation, quantized and named tensors go the long way.
at::Tensor stack_contiguous(const std::vector<at::Tensor>& tensors) {
  const at::Tensor& first = tensors.front();
  // The loop below checks the rest for every sample, the first included.
  if (!first.defined() || first.is_quantized()) return {};
  const at::IntArrayRef sizes = first.sizes();
  const at::ScalarType dtype = first.scalar_type();
  const bool recording = at::GradMode::is_enabled();
  for (const at::Tensor& tensor : tensors) {
    if (!tensor.defined() || tensor.scalar_type() != dtype || tensor.sizes() != sizes || !tensor.device().is_cpu() ||
        tensor.layout() != at::kStrided || !tensor.is_contiguous() || tensor.is_conj() || tensor.is_neg() ||
        has_names(tensor) || (recording && tensor.requires_grad())) {
      return {};
    }
  }
  std::vector<std::int64_t> batch_sizes;
  batch_sizes.reserve(sizes.size() + 1);
  batch_sizes.push_back(static_cast<std::int64_t>(tensors.size()));
  batch_sizes.insert(batch_sizes.end(), sizes.begin(), sizes.end());
  at::Tensor batch = at::empty(batch_sizes, first.options());
  const std::size_t bytes = first.nbytes();
  if (bytes == 0) return batch;
  auto* out = static_cast<std::byte*>(batch.data_ptr());
  for (const at::Tensor& tensor : tensors) {
    std::memcpy(out, tensor.data_ptr(), bytes);
    out += bytes;
  }
  return batch;
}

// torch::stack's own message names neither the sample nor the field, so the
// samples are compared only when it fails (comparing every sample up front
// costs as much as the rest of the loader's per-batch work).
at::Tensor stack_field(std::vector<at::Tensor>& tensors, const std::string& field) {
  check_not_empty(tensors.size());
  if (at::Tensor batch = stack_contiguous(tensors); batch.defined()) return batch;
  try {
    return torch::stack(tensors);
  } catch (const c10::Error&) {
    const at::Tensor& first = tensors.front();
    for (std::size_t i = 1; i < tensors.size(); ++i) {
      const at::Tensor& mine = tensors[i];
      if (first.defined() != mine.defined() ||
          (mine.defined() && (mine.sizes() != first.sizes() || mine.scalar_type() != first.scalar_type()))) {
        differs(i, field, describe(mine), describe(first), kSameShape);
      }
    }
    throw;
  }
}

std::string keys_of(const std::vector<std::string>& keys) {
  std::string text;
  for (const auto& key : keys) text += (text.empty() ? "'" : ", '") + key + "'";
  return text.empty() ? "no keys" : "keys " + text;
}

constexpr const char* kSameKeys =
    "A batch of maps stacks each key's values, so every sample must have the same keys; give the samples the "
    "same keys in the dataset's get(), or give the loader a collate function.";

// The two string-keyed maps of tensors a sample may be: their keys, a
// value moved out, and an insertion.
std::vector<std::string> key_names(const std::map<std::string, at::Tensor>& map) {
  std::vector<std::string> names;
  for (const auto& [key, value] : map) names.push_back(key);
  return names;
}
std::vector<std::string> key_names(const c10::Dict<std::string, at::Tensor>& dict) {
  std::vector<std::string> names;
  for (const auto& entry : dict) names.push_back(entry.key());
  return names;
}
at::Tensor take(std::map<std::string, at::Tensor>::iterator found) { return std::move(found->second); }
at::Tensor take(const c10::Dict<std::string, at::Tensor>::iterator& found) { return found->value(); }
void put(std::map<std::string, at::Tensor>& map, const std::string& key, at::Tensor value) {
  map.emplace(key, std::move(value));
}
void put(c10::Dict<std::string, at::Tensor>& dict, const std::string& key, at::Tensor value) {
  dict.insert(key, std::move(value));
}

// Every key's values stacked; every map must have exactly the keys of the first.
template <class Map>
Map collate_map(std::vector<Map>& samples, const std::string& field) {
  check_not_empty(samples.size());
  const std::vector<std::string> names = key_names(samples.front());
  Map batch;
  for (const auto& key : names) {
    std::vector<at::Tensor> column;
    column.reserve(samples.size());
    for (std::size_t i = 0; i < samples.size(); ++i) {
      auto found = samples[i].find(key);
      if (found == samples[i].end() || samples[i].size() != names.size()) {
        differs(i, field, keys_of(key_names(samples[i])), keys_of(names), kSameKeys);
      }
      column.push_back(take(found));
    }
    put(batch, key, stack_field(column, join(field, "['" + key + "']")));
  }
  return batch;
}

// Numbers become a tensor of one number per sample (torch's default_collate).
at::Tensor numbers_to_tensor(const std::vector<c10::IValue>& samples) {
  const c10::IValue& first = samples.front();
  if (first.isBool()) {
    std::vector<std::uint8_t> values;
    for (const auto& sample : samples) values.push_back(sample.toBool() ? 1 : 0);
    return torch::tensor(values, torch::kUInt8).to(torch::kBool);
  }
  if (first.isInt()) {
    std::vector<std::int64_t> values;
    for (const auto& sample : samples) values.push_back(sample.toInt());
    return torch::tensor(values, torch::kInt64);
  }
  std::vector<double> values;
  for (const auto& sample : samples) values.push_back(sample.toDouble());
  return torch::tensor(values, torch::kFloat64);
}

// IValue kinds, as the samples must agree on them.
std::string kind_of(const c10::IValue& value) {
  if (value.isTensor()) return "a tensor";
  if (value.isTuple()) return "a tuple of " + std::to_string(value.toTupleRef().elements().size());
  if (value.isGenericDict()) return "a dict";
  if (value.isList()) return "a list of " + std::to_string(value.toListRef().size());
  if (value.isBool()) return "a bool";
  if (value.isInt()) return "an int";
  if (value.isDouble()) return "a double";
  if (value.isString()) return "a string";
  return "a " + value.tagKind();
}

}  // namespace

void loader_error(std::string_view component, const std::string& what) {
  throw ConfigError(std::string(component) + ": " + what);
}

std::string element_field(const std::string& field, std::size_t index) {
  return join(field, "element " + std::to_string(index));
}

at::Tensor collate_field(std::vector<at::Tensor>& samples, const std::string& field) {
  return stack_field(samples, field);
}

torch::data::Example<> collate_field(std::vector<torch::data::Example<>>& samples, const std::string& field) {
  check_not_empty(samples.size());
  std::vector<at::Tensor> data;
  std::vector<at::Tensor> targets;
  data.reserve(samples.size());
  targets.reserve(samples.size());
  for (auto& sample : samples) {
    data.push_back(std::move(sample.data));
    targets.push_back(std::move(sample.target));
  }
  return {stack_field(data, join(field, "data")), stack_field(targets, join(field, "target"))};
}

std::map<std::string, at::Tensor> collate_field(std::vector<std::map<std::string, at::Tensor>>& samples,
                                                const std::string& field) {
  return collate_map(samples, field);
}

c10::Dict<std::string, at::Tensor> collate_field(std::vector<c10::Dict<std::string, at::Tensor>>& samples,
                                                 const std::string& field) {
  return collate_map(samples, field);
}

c10::IValue collate_field(std::vector<c10::IValue>& samples, const std::string& field) {
  check_not_empty(samples.size());
  const c10::IValue& first = samples.front();
  const std::string kind = kind_of(first);
  for (std::size_t i = 1; i < samples.size(); ++i) {
    if (kind_of(samples[i]) != kind) {
      differs(i, field, kind_of(samples[i]), kind,
              "A batch collates its samples field by field, so every sample must have the same structure.");
    }
  }
  if (first.isTensor()) {
    std::vector<at::Tensor> tensors;
    tensors.reserve(samples.size());
    for (auto& sample : samples) tensors.push_back(std::move(sample).toTensor());
    return stack_field(tensors, field);
  }
  if (first.isBool() || first.isInt() || first.isDouble()) return numbers_to_tensor(samples);
  if (first.isString()) {
    c10::List<std::string> strings;
    for (const auto& sample : samples) strings.push_back(sample.toStringRef());
    return strings;
  }
  if (first.isTuple() || first.isList()) {
    const bool tuple = first.isTuple();
    const std::size_t width = tuple ? first.toTupleRef().elements().size() : first.toListRef().size();
    std::vector<c10::IValue> collated;
    collated.reserve(width);
    for (std::size_t e = 0; e < width; ++e) {
      std::vector<c10::IValue> column;
      column.reserve(samples.size());
      for (const auto& sample : samples) {
        column.push_back(tuple ? sample.toTupleRef().elements()[e] : sample.toListRef()[e]);
      }
      collated.push_back(collate_field(column, element_field(field, e)));
    }
    if (tuple) return c10::ivalue::Tuple::create(std::move(collated));
    const bool tensors =
        std::all_of(collated.begin(), collated.end(), [](const c10::IValue& v) { return v.isTensor(); });
    c10::impl::GenericList list(tensors ? c10::TypePtr(c10::TensorType::get()) : c10::TypePtr(c10::AnyType::get()));
    for (auto& value : collated) list.push_back(std::move(value));
    return list;
  }
  if (first.isGenericDict()) {
    std::vector<c10::impl::GenericDict> dicts;
    dicts.reserve(samples.size());
    for (const auto& sample : samples) dicts.push_back(sample.toGenericDict());
    std::vector<std::string> names;
    for (const auto& entry : dicts.front()) {
      if (!entry.key().isString()) {
        loader_error("collate", field_of_sample(field) + " is a dict with " + kind_of(entry.key()) +
                                    " keys; a batch collates dicts with string keys only. Give the loader a "
                                    "collate function for other keys.");
      }
      names.push_back(entry.key().toStringRef());
    }
    auto keys = [](const c10::impl::GenericDict& dict) {
      std::vector<std::string> found;
      for (const auto& entry : dict) found.push_back(entry.key().isString() ? entry.key().toStringRef() : "?");
      return found;
    };
    std::vector<std::pair<std::string, c10::IValue>> collated;
    for (const auto& key : names) {
      std::vector<c10::IValue> column;
      column.reserve(dicts.size());
      for (std::size_t i = 0; i < dicts.size(); ++i) {
        auto found = dicts[i].find(key);
        if (found == dicts[i].end() || dicts[i].size() != names.size()) {
          differs(i, field, keys_of(keys(dicts[i])), keys_of(names), kSameKeys);
        }
        column.push_back(found->value());
      }
      collated.emplace_back(key, collate_field(column, join(field, "['" + key + "']")));
    }
    const bool tensors =
        std::all_of(collated.begin(), collated.end(), [](const auto& entry) { return entry.second.isTensor(); });
    c10::impl::GenericDict batch(c10::StringType::get(),
                                 tensors ? c10::TypePtr(c10::TensorType::get()) : c10::TypePtr(c10::AnyType::get()));
    for (auto& [key, value] : collated) batch.insert(key, std::move(value));
    return batch;
  }
  loader_error("collate", field_of_sample(field) + " is " + kind +
                              ", which the default collate does not batch (tensors, numbers, strings, and tuples, "
                              "lists and string-keyed dicts of these). Give the loader a collate function.");
}

torch::data::Example<> stack_examples(std::vector<torch::data::Example<>>& examples) {
  return collate_field(examples, std::string());
}

at::Tensor place_on(at::Tensor tensor, const BatchPlacement& where) {
  if (!tensor.defined() || tensor.device() == where.device) return tensor;
  // An asynchronous host-to-device copy is only asynchronous from pinned
  // memory; from pageable memory CUDA stages it synchronously.
  if (where.pin_memory && tensor.is_cpu() && !tensor.is_pinned()) tensor = tensor.pin_memory();
  return tensor.to(where.device, where.non_blocking);
}

torch::data::Example<> place_on(torch::data::Example<> batch, const BatchPlacement& where) {
  return {place_on(std::move(batch.data), where), place_on(std::move(batch.target), where)};
}

std::map<std::string, at::Tensor> place_on(std::map<std::string, at::Tensor> batch, const BatchPlacement& where) {
  for (auto& [key, tensor] : batch) tensor = place_on(std::move(tensor), where);
  return batch;
}

c10::Dict<std::string, at::Tensor> place_on(c10::Dict<std::string, at::Tensor> batch, const BatchPlacement& where) {
  c10::Dict<std::string, at::Tensor> placed;
  for (const auto& entry : batch) placed.insert(entry.key(), place_on(entry.value(), where));
  return placed;
}

c10::IValue place_on(c10::IValue batch, const BatchPlacement& where) {
  if (batch.isTensor()) return place_on(std::move(batch).toTensor(), where);
  if (batch.isTuple()) {
    std::vector<c10::IValue> elements;
    for (const auto& element : batch.toTupleRef().elements()) elements.push_back(place_on(element, where));
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  if (batch.isList()) {
    c10::List<c10::IValue> list = batch.toList();
    c10::impl::GenericList placed(list.elementType());
    for (std::size_t i = 0; i < list.size(); ++i) placed.push_back(place_on(list.get(i), where));
    return placed;
  }
  if (batch.isGenericDict()) {
    const c10::impl::GenericDict dict = batch.toGenericDict();
    c10::impl::GenericDict placed(dict.keyType(), dict.valueType());
    for (const auto& entry : dict) placed.insert(entry.key(), place_on(entry.value(), where));
    return placed;
  }
  return batch;  // numbers, strings: nothing to move
}

}  // namespace accelerate::detail
