// PaddingCollate: the collate function of token batches (transformers'
// DataCollatorWithPadding). Each sample is a string-keyed map of tensors
// (input_ids, attention_mask, labels, ...); every key's values are stacked
// along a new first dimension, and values of different lengths (their first
// dimension: the sequence) are first padded to the longest of the batch.
//
//   accelerate::PaddingCollate pad({.pad_values = {{"labels", -100}}});
//   accelerate::DataLoaderShard loader(Tokens(...), state, {.batch_size = 16}, {}, pad);
//   for (const std::map<std::string, torch::Tensor>& batch : loader) {
//     batch.at("input_ids");   // [16, longest], padded with 0 on the right
//   }
//
// The padding matches accelerate::pad_across_processes over dimension 1 with
// the same pad value and side (pad_first = left), so per-rank batches padded
// here line up when gathered.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

namespace accelerate {

/// Where the padding goes: after the values (right, the default) or before them.
enum class PaddingSide { right, left };

struct PaddingCollateOptions {
  /// The pad value of each key (e.g. -100 for labels, which loss functions ignore).
  std::map<std::string, double> pad_values;
  /// The pad value of a key not listed (0: input_ids, attention_mask).
  double default_pad_value = 0;
  PaddingSide padding_side = PaddingSide::right;
};

/// Collates std::map<std::string, at::Tensor> samples. For each key, values
/// of one shape are stacked (as DefaultCollate does); values whose first
/// dimension differs are padded along it to the longest of the batch, then
/// stacked: the batch is [samples, longest, ...]. Safe to call from several
/// worker threads at once. Throws ConfigError naming the first sample that
/// differs from sample 0 in its keys, a value's dtype, its number of
/// dimensions, or a dimension other than the first.
class PaddingCollate {
 public:
  PaddingCollate() = default;
  explicit PaddingCollate(PaddingCollateOptions options) : options_(std::move(options)) {}

  std::map<std::string, at::Tensor> operator()(std::vector<std::map<std::string, at::Tensor>> samples) const;

  [[nodiscard]] const PaddingCollateOptions& options() const noexcept { return options_; }
  /// The pad value used for `key`.
  [[nodiscard]] double pad_value(const std::string& key) const;

 private:
  PaddingCollateOptions options_;
};

}  // namespace accelerate
