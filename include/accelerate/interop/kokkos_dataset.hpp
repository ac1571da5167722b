// ViewDataset: a map-style LibTorch dataset serving samples out of Kokkos
// views, dimension 0 being the sample index.
//
//   Kokkos::View<float**> x("x", n, features);       // sample i: x(i, :)
//   Kokkos::View<std::int64_t*> y("y", n);           // its label: y(i)
//   accelerate::DataLoaderShard loader(accelerate::kokkos::ViewDataset(x, y), state,
//                                      {.batch_size = 32, .shuffle = true});
//
// Samples are slices of the views (no copy until the loader stacks a batch);
// the dataset keeps the views alive. The views are read when a sample is
// fetched, so writes to them (a simulation advancing its fields) show in
// later batches. get() may be called from several loader threads at once.
#pragma once

#include "accelerate/interop/kokkos_tensor.hpp"

#include <torch/data/datasets/base.h>
#include <torch/data/example.h>
#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace accelerate::kokkos {

class ViewDataset : public torch::data::datasets::Dataset<ViewDataset> {
 public:
  /// Samples data(i, …); every target is an empty tensor of shape [0].
  template <ShareableView D>
  explicit ViewDataset(const D& data) : data_(samples_of(data)), targets_() {}

  /// Samples data(i, …) with targets(i, …); the views' first extents must agree.
  template <ShareableView D, ShareableView T>
  ViewDataset(const D& data, const T& targets) : data_(samples_of(data)), targets_(samples_of(targets)) {
    if (targets_.size(0) != data_.size(0)) {
      throw ConfigError("ViewDataset: the data view has " + std::to_string(data_.size(0)) +
                        " samples (extent 0) but the targets view has " + std::to_string(targets_.size(0)) +
                        ". Pass views with one target per sample");
    }
  }

  torch::data::Example<> get(std::size_t index) override {
    const auto n = static_cast<std::size_t>(data_.size(0));
    if (index >= n) {
      throw ConfigError("ViewDataset::get: sample " + std::to_string(index) + " is out of range for " +
                        std::to_string(n) + " samples");
    }
    const auto i = static_cast<std::int64_t>(index);
    return {data_.select(0, i), targets_.defined() ? targets_.select(0, i) : torch::empty({0})};
  }

  [[nodiscard]] torch::optional<std::size_t> size() const override { return static_cast<std::size_t>(data_.size(0)); }

  /// All samples as one tensor sharing the data view's memory.
  [[nodiscard]] const at::Tensor& data() const noexcept { return data_; }
  /// All targets (undefined without a targets view).
  [[nodiscard]] const at::Tensor& targets() const noexcept { return targets_; }

 private:
  template <ShareableView V>
  static at::Tensor samples_of(const V& view) {
    static_assert(detail::rank_of<V>() >= 1, "ViewDataset needs views of rank >= 1: dimension 0 is the sample index");
    return to_tensor(view);
  }

  at::Tensor data_;
  at::Tensor targets_;
};

}  // namespace accelerate::kokkos
