// Kokkos views in training checkpoints: a view becomes an object for
// Accelerator::register_for_checkpointing. Its data is one HDF5 dataset
// (group custom_checkpoint_<i>, named after the view's label; with
// Distribution::PerRank one row per rank) holding the elements in index order — view(i, j, …) at row-major position (i, j, …) —
// whatever the view's layout, so a checkpoint written from a LayoutLeft view
// reads the same in h5py and loads into a view of any layout. The view's
// layout, memory space and label are recorded as attributes of the group.
//
//   Kokkos::View<double**> temperature("temperature", nx, ny);
//   accelerator.register_for_checkpointing(
//       accelerate::kokkos::checkpoint_state(temperature, accelerate::kokkos::Distribution::PerRank));
//
// Saving writes straight from the view's memory (host views; device views
// go through a host copy). Loading copies into the same view, which must
// have the saved extents and value type (ConfigError otherwise). The
// registered state holds a handle to the view, which keeps it alive: drop
// the Accelerator (or call free_memory) before Kokkos is finalised.
#pragma once

#include <map>
#include <string>

#include "accelerate/error.hpp"
#include "accelerate/interop/kokkos_tensor.hpp"
#include "accelerate/training_state/training_checkpoint.hpp"

namespace accelerate::kokkos {

/// How a view's data relates across ranks.
enum class Distribution {
  Replicated,  ///< the same values on every rank (stored once)
  PerRank,     ///< each rank's own part, e.g. its slab of a domain (one row per rank)
};

/// `name` (default: the view's label, else "view") names the dataset.
template <ShareableView V>
checkpoint::TensorState checkpoint_state(const V& view, Distribution distribution = Distribution::Replicated,
                                         std::string name = {}) {
  if (name.empty()) name = view.label().empty() ? std::string("view") : view.label();
  checkpoint::TensorState state;
  state.per_rank = distribution == Distribution::PerRank;
  state.attributes = {{"layout", detail::LayoutTraits<typename V::array_layout>::name},
                      {"memory_space", detail::SpaceTraits<typename V::memory_space>::name},
                      {"label", view.label()}};
  state.save = [view, name] { return std::map<std::string, at::Tensor>{{name, to_tensor(view)}}; };
  state.load = [view, name](const std::map<std::string, at::Tensor>& saved) {
    const auto it = saved.find(name);
    const at::Tensor target = to_tensor(view);
    if (it == saved.end()) {
      throw ConfigError("checkpoint: no dataset '" + name + "' for the Kokkos view '" + view.label() +
                        "'. Register the same views, in the same order, as the run that saved it.");
    }
    if (it->second.sizes() != target.sizes() || it->second.scalar_type() != target.scalar_type()) {
      throw ConfigError("checkpoint: the Kokkos view '" + view.label() + "' is " +
                        detail::shape_string(target.sizes()) + " " + c10::toString(target.scalar_type()) +
                        " but the checkpoint holds " + detail::shape_string(it->second.sizes()) + " " +
                        c10::toString(it->second.scalar_type()) +
                        ". Allocate the view with the saved extents and value type before load_state.");
    }
    target.copy_(it->second);  // strided copy: any layout, any device
  };
  return state;
}

}  // namespace accelerate::kokkos
