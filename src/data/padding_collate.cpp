#include "accelerate/data/padding_collate.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <utility>

#include "accelerate/data/collate.hpp"

namespace accelerate {

namespace {

std::string padded_value_text(const at::Tensor& tensor) {
  std::ostringstream text;
  text << tensor.sizes() << " " << tensor.scalar_type();
  return text.str();
}

std::string padded_keys_text(const std::map<std::string, at::Tensor>& sample) {
  std::string text;
  for (const auto& [key, value] : sample) text += (text.empty() ? "'" : ", '") + key + "'";
  return text.empty() ? "no keys" : "keys " + text;
}

[[noreturn]] void padded_sample_differs(std::size_t index, const std::string& mine, const std::string& first,
                                        const std::string& advice) {
  detail::loader_error("PaddingCollate", "sample " + std::to_string(index) + " of the batch has " + mine +
                                             ", but sample 0 has " + first + ". " + advice);
}

constexpr const char* kPadsAlongFirstDimension =
    "A key's values are padded along their first dimension (the sequence) only, so they must agree in dtype, in "
    "their number of dimensions and in every other dimension.";

// The values of one key, padded along dimension 0 to the longest and
// stacked; values of one shape are stacked as DefaultCollate does.
at::Tensor pad_and_stack(std::vector<at::Tensor>& values, const std::string& key, double pad_value, PaddingSide side) {
  const at::Tensor& first = values.front();
  const std::string field = "['" + key + "']";
  bool same_shape = true;
  std::int64_t longest = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const at::Tensor& value = values[i];
    if (!value.defined() || !first.defined()) {
      if (value.defined() != first.defined()) {
        padded_sample_differs(i, field + " " + (value.defined() ? padded_value_text(value) : "an undefined tensor"),
                              first.defined() ? padded_value_text(first) : "an undefined tensor",
                              kPadsAlongFirstDimension);
      }
      continue;
    }
    if (value.scalar_type() != first.scalar_type() || value.dim() != first.dim() ||
        (value.dim() > 0 && value.sizes().slice(1) != first.sizes().slice(1))) {
      padded_sample_differs(i, field + " " + padded_value_text(value), padded_value_text(first),
                            kPadsAlongFirstDimension);
    }
    same_shape = same_shape && value.sizes() == first.sizes();
    if (value.dim() > 0) longest = std::max(longest, value.size(0));
  }
  if (same_shape) return detail::collate_field(values, field);
  std::vector<std::int64_t> shape{static_cast<std::int64_t>(values.size()), longest};
  const auto rest = first.sizes().slice(1);
  shape.insert(shape.end(), rest.begin(), rest.end());
  at::Tensor batch = at::full(shape, pad_value, first.options());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::int64_t length = values[i].size(0);
    const std::int64_t start = side == PaddingSide::right ? 0 : longest - length;
    batch.select(0, static_cast<std::int64_t>(i)).narrow(0, start, length).copy_(values[i]);
  }
  return batch;
}

}  // namespace

double PaddingCollate::pad_value(const std::string& key) const {
  const auto found = options_.pad_values.find(key);
  return found == options_.pad_values.end() ? options_.default_pad_value : found->second;
}

std::map<std::string, at::Tensor> PaddingCollate::operator()(
    std::vector<std::map<std::string, at::Tensor>> samples) const {
  if (samples.empty()) detail::loader_error("PaddingCollate", "a batch needs at least one sample.");
  const std::map<std::string, at::Tensor>& first = samples.front();
  for (std::size_t i = 1; i < samples.size(); ++i) {
    const bool same_keys = samples[i].size() == first.size() &&
                           std::equal(samples[i].begin(), samples[i].end(), first.begin(),
                                      [](const auto& a, const auto& b) { return a.first == b.first; });
    if (!same_keys) {
      padded_sample_differs(i, padded_keys_text(samples[i]), padded_keys_text(first),
                            "A batch pads and stacks each key's values, so every sample must have the same keys.");
    }
  }
  std::map<std::string, at::Tensor> batch;
  for (const auto& [key, unused] : first) {
    std::vector<at::Tensor> values;
    values.reserve(samples.size());
    for (auto& sample : samples) values.push_back(std::move(sample.at(key)));
    batch.emplace(key, pad_and_stack(values, key, pad_value(key), options_.padding_side));
  }
  return batch;
}

}  // namespace accelerate
