// Collectives on Kokkos views: the ProcessGroup operations and the nested
// operations of comm/operations.hpp, taking views where they take tensors.
//
//   Kokkos::View<double**> field("field", nx, ny);
//   accelerate::all_reduce(*group, field, {.op = accelerate::ReduceOp::Max});  // in place
//   accelerate::broadcast(*group, field, {.root = 0});                         // in place
//   at::Tensor all = accelerate::gather(*group, field);    // [Σ nx_r, ny], every rank
//
// Every view goes through kokkos::to_tensor (no copy), so a host view
// travels over MPI and a CUDA view over NCCL, by the group's routing of the
// tensor's device. Dense views of any layout are reduced and broadcast as one
// flat buffer, so even a LayoutLeft view moves without a copy. A view with
// holes (a strided subview) cannot be handed to MPI or NCCL as it is; the
// backend then stages it through a contiguous buffer, as it does for a
// non-contiguous tensor.
//
// These are overloads in namespace accelerate, beside the tensor forms, and
// follow their argument order: (group, output, input, options).
#pragma once

#include "accelerate/interop/kokkos_tensor.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Scalar.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "accelerate/comm/operations.hpp"
#include "accelerate/comm/process_group.hpp"
#include "accelerate/comm/types.hpp"
#include "accelerate/comm/work.hpp"

namespace accelerate {

namespace kokkos::detail {

/// The view as a tensor for an element-wise operation: a dense view whose
/// tensor is not contiguous (LayoutLeft, a permuted LayoutStride) is seen as
/// one flat buffer in memory order, which MPI and NCCL take as it is. Every
/// rank passes a view of the same type and shape, so the orders agree.
template <ShareableView V>
at::Tensor elementwise_tensor(const V& view) {
  at::Tensor tensor = to_tensor(view);
  if (tensor.dim() > 1 && !tensor.is_contiguous() && view.span_is_contiguous() && view.span() == view.size()) {
    return tensor.as_strided({tensor.numel()}, {1});
  }
  return tensor;
}

/// The output of a rooted operation: the view on the root, nothing elsewhere
/// (the view of a non-root rank is neither read nor written).
template <ShareableView V>
at::Tensor root_output(const ProcessGroup& group, const V& view, int root) {
  return group.rank() == root ? to_tensor(view) : at::Tensor();
}

}  // namespace kokkos::detail

// --- in place ------------------------------------------------------------------

/// Reduces `view` over the group, in place, on every rank.
template <kokkos::ShareableView V>
requires(!std::is_const_v<typename V::value_type>) void all_reduce(ProcessGroup& group, const V& view,
                                                                   const AllReduceOptions& options = {}) {
  at::Tensor tensor = kokkos::detail::elementwise_tensor(view);
  group.all_reduce(tensor, options);
}

/// Posted form of all_reduce; the Work keeps the view's memory alive.
template <kokkos::ShareableView V>
requires(!std::is_const_v<typename V::value_type>) std::unique_ptr<Work> all_reduce_async(
    ProcessGroup& group, const V& view, const AllReduceOptions& options = {}) {
  at::Tensor tensor = kokkos::detail::elementwise_tensor(view);
  return group.all_reduce_async(tensor, options);
}

/// The root's `view` is sent; elsewhere `view` (same shape) is overwritten.
template <kokkos::ShareableView V>
requires(!std::is_const_v<typename V::value_type>) void broadcast(ProcessGroup& group, const V& view,
                                                                  const BroadcastOptions& options = {}) {
  at::Tensor tensor = kokkos::detail::elementwise_tensor(view);
  group.broadcast(tensor, options);
}

template <kokkos::ShareableView V>
requires(!std::is_const_v<typename V::value_type>) std::unique_ptr<Work> broadcast_async(
    ProcessGroup& group, const V& view, const BroadcastOptions& options = {}) {
  at::Tensor tensor = kokkos::detail::elementwise_tensor(view);
  return group.broadcast_async(tensor, options);
}

// --- into an output view ----------------------------------------------------------

/// input [k, …] on every rank -> output [size*k, …] on every rank (rank order).
template <kokkos::ShareableView Out, kokkos::ShareableView In>
requires(!std::is_const_v<typename Out::value_type>) void all_gather(ProcessGroup& group, const Out& output,
                                                                     const In& input,
                                                                     const AllGatherOptions& options = {}) {
  at::Tensor out = kokkos::to_tensor(output);
  group.all_gather_async(out, kokkos::to_tensor(input), options)->wait();
}

/// input [k, …] -> output [size*k, …] on the root; `output` is ignored elsewhere.
template <kokkos::ShareableView Out, kokkos::ShareableView In>
requires(!std::is_const_v<typename Out::value_type>) void gather(ProcessGroup& group, const Out& output,
                                                                 const In& input, const GatherOptions& options = {}) {
  at::Tensor out = kokkos::detail::root_output(group, output, options.root);
  group.gather_async(out, kokkos::to_tensor(input), options)->wait();
}

/// The root's input [size*k, …] -> output [k, …] on every rank; `input` is
/// ignored off the root.
template <kokkos::ShareableView Out, kokkos::ShareableView In>
requires(!std::is_const_v<typename Out::value_type>) void scatter(ProcessGroup& group, const Out& output,
                                                                  const In& input, const ScatterOptions& options = {}) {
  at::Tensor out = kokkos::to_tensor(output);
  const at::Tensor in = group.rank() == options.root ? kokkos::to_tensor(input) : at::Tensor();
  group.scatter_async(out, in, options)->wait();
}

/// input [size*k, …] -> this rank's reduced block, output [k, …].
template <kokkos::ShareableView Out, kokkos::ShareableView In>
requires(!std::is_const_v<typename Out::value_type>) void reduce_scatter(ProcessGroup& group, const Out& output,
                                                                         const In& input,
                                                                         const ReduceScatterOptions& options = {}) {
  at::Tensor out = kokkos::to_tensor(output);
  group.reduce_scatter_async(out, kokkos::to_tensor(input), options)->wait();
}

/// input [size*k, …]: block r goes to rank r; output [size*k, …] receives
/// the blocks in rank order.
template <kokkos::ShareableView Out, kokkos::ShareableView In>
requires(!std::is_const_v<typename Out::value_type>) void all_to_all(ProcessGroup& group, const Out& output,
                                                                     const In& input,
                                                                     const AllToAllOptions& options = {}) {
  at::Tensor out = kokkos::to_tensor(output);
  group.all_to_all_async(out, kokkos::to_tensor(input), options)->wait();
}

// --- returning new tensors (the view is only read) ----------------------------------

/// input [k, …] on every rank -> [size*k, …] (rank order), a new tensor on the view's device.
template <kokkos::ShareableView V>
at::Tensor all_gather(ProcessGroup& group, const V& input, const AllGatherOptions& options = {}) {
  return group.all_gather(kokkos::to_tensor(input), options);
}

/// Nested gather (operations.hpp): first extents may differ between ranks;
/// the views' data concatenated along dimension 0 in rank order, on every rank.
template <kokkos::ShareableView V>
at::Tensor gather(ProcessGroup& group, const V& input) {
  return gather(group, c10::IValue(kokkos::to_tensor(input))).toTensor();
}

/// Nested reduce (operations.hpp): "sum", "mean" or "none", times `scale`.
template <kokkos::ShareableView V>
at::Tensor reduce(ProcessGroup& group, const V& input, std::string_view reduction = "mean", double scale = 1.0) {
  return reduce(group, c10::IValue(kokkos::to_tensor(input)), reduction, scale).toTensor();
}

/// Nested pad_across_processes (operations.hpp): padded along `dim` to the
/// largest extent any rank has there (a new tensor when padding was needed).
template <kokkos::ShareableView V>
at::Tensor pad_across_processes(ProcessGroup& group, const V& input, std::int64_t dim = 0,
                                const at::Scalar& pad_index = 0, bool pad_first = false) {
  return pad_across_processes(group, c10::IValue(kokkos::to_tensor(input)), dim, pad_index, pad_first).toTensor();
}

}  // namespace accelerate
