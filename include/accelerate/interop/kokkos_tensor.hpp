// Kokkos::View <-> at::Tensor without copies.
//
//   Kokkos::View<double**> field("field", nx, ny);
//   at::Tensor t = accelerate::kokkos::to_tensor(field);    // shares field's memory;
//                                                           // keeps it alive
//   auto v = accelerate::kokkos::to_view<Kokkos::View<double**>>(t);  // unmanaged:
//                                                           // t must outlive v
//
// What can be shared is decided by three tables (docs/kokkos.md):
//   value type   float, double, int8/16/32/64, uint8, bool; Kokkos half_t /
//                bhalf_t where Kokkos gives them 16 bits (not on Serial-only builds)
//   memory space HostSpace -> cpu; CudaSpace, CudaUVMSpace -> cuda:<Kokkos' device>;
//                CudaHostPinnedSpace -> cpu (when Kokkos has CUDA)
//   layout       LayoutRight (row-major), LayoutLeft (column-major), LayoutStride
// A view type outside them does not satisfy ShareableView (a compile-time
// error naming the failed concept). A tensor that cannot be seen through the
// requested view type raises ConversionError naming the mismatch; nothing is
// ever copied behind the caller's back. The copying calls say so in their
// names: copy_to_tensor, copy_to_view.
#pragma once

#include "accelerate/interop/kokkos_guard.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "accelerate/error.hpp"

namespace accelerate::kokkos {

/// A tensor and a view could not be shared: dtype, rank, extent, device or
/// stride mismatch. The message names both sides and what to do.
class ConversionError : public Error {
 public:
  using Error::Error;
};

namespace detail {

// --- value types ----------------------------------------------------------
// Undefined for unsupported types: ShareableScalar checks for a definition.
template <class T>
struct ScalarTraits;

#define ACCELERATE_KOKKOS_SCALAR(cpp_type, torch_type, label)            \
  template <>                                                            \
  struct ScalarTraits<cpp_type> {                                        \
    static constexpr c10::ScalarType type = c10::ScalarType::torch_type; \
    static constexpr const char* name = label;                           \
  };
ACCELERATE_KOKKOS_SCALAR(float, Float, "float")
ACCELERATE_KOKKOS_SCALAR(double, Double, "double")
ACCELERATE_KOKKOS_SCALAR(std::int8_t, Char, "int8_t")
ACCELERATE_KOKKOS_SCALAR(std::uint8_t, Byte, "uint8_t")
ACCELERATE_KOKKOS_SCALAR(std::int16_t, Short, "int16_t")
ACCELERATE_KOKKOS_SCALAR(std::int32_t, Int, "int32_t")
ACCELERATE_KOKKOS_SCALAR(std::int64_t, Long, "int64_t")
ACCELERATE_KOKKOS_SCALAR(bool, Bool, "bool")
// Kokkos' half types are 16-bit only with some backends (CUDA, HIP, SYCL);
// elsewhere they are aliases of float and already covered above.
#if defined(KOKKOS_HALF_T_IS_FLOAT) && !KOKKOS_HALF_T_IS_FLOAT
ACCELERATE_KOKKOS_SCALAR(Kokkos::Experimental::half_t, Half, "Kokkos::Experimental::half_t")
#define ACCELERATE_KOKKOS_HAS_HALF 1
#else
#define ACCELERATE_KOKKOS_HAS_HALF 0
#endif
#if defined(KOKKOS_BHALF_T_IS_FLOAT) && !KOKKOS_BHALF_T_IS_FLOAT
ACCELERATE_KOKKOS_SCALAR(Kokkos::Experimental::bhalf_t, BFloat16, "Kokkos::Experimental::bhalf_t")
#define ACCELERATE_KOKKOS_HAS_BFLOAT16 1
#else
#define ACCELERATE_KOKKOS_HAS_BFLOAT16 0
#endif
#undef ACCELERATE_KOKKOS_SCALAR

// --- memory spaces ----------------------------------------------------------
template <class Space>
struct SpaceTraits;

template <>
struct SpaceTraits<Kokkos::HostSpace> {
  static constexpr c10::DeviceType device = c10::DeviceType::CPU;
  static constexpr const char* name = "Kokkos::HostSpace";
};
#if defined(KOKKOS_ENABLE_CUDA)
template <>
struct SpaceTraits<Kokkos::CudaSpace> {
  static constexpr c10::DeviceType device = c10::DeviceType::CUDA;
  static constexpr const char* name = "Kokkos::CudaSpace";
};
template <>
struct SpaceTraits<Kokkos::CudaUVMSpace> {
  static constexpr c10::DeviceType device = c10::DeviceType::CUDA;
  static constexpr const char* name = "Kokkos::CudaUVMSpace";
};
template <>
struct SpaceTraits<Kokkos::CudaHostPinnedSpace> {
  static constexpr c10::DeviceType device = c10::DeviceType::CPU;
  static constexpr const char* name = "Kokkos::CudaHostPinnedSpace";
};
#endif

// --- layouts ------------------------------------------------------------------
template <class Layout>
struct LayoutTraits;
template <>
struct LayoutTraits<Kokkos::LayoutRight> {
  static constexpr const char* name = "Kokkos::LayoutRight";
};
template <>
struct LayoutTraits<Kokkos::LayoutLeft> {
  static constexpr const char* name = "Kokkos::LayoutLeft";
};
template <>
struct LayoutTraits<Kokkos::LayoutStride> {
  static constexpr const char* name = "Kokkos::LayoutStride";
};

}  // namespace detail

/// A value type with a tensor dtype of the same bits (const allowed).
template <class T>
concept ShareableScalar = requires {
  detail::ScalarTraits<std::remove_const_t<T>>::type;
};

/// A memory space whose allocations a tensor can address.
template <class Space>
concept ShareableMemorySpace = requires {
  detail::SpaceTraits<Space>::device;
};

/// A layout with a strided tensor equivalent.
template <class Layout>
concept ShareableLayout = requires {
  detail::LayoutTraits<Layout>::name;
};

/// A Kokkos::View whose memory a tensor can share (and the reverse).
template <class V>
concept ShareableView = Kokkos::is_view<V>::value && ShareableScalar<typename V::value_type> &&
    ShareableMemorySpace<typename V::memory_space> && ShareableLayout<typename V::array_layout>;

/// The tensor dtype of a value type.
template <ShareableScalar T>
constexpr c10::ScalarType dtype_of() {
  return detail::ScalarTraits<std::remove_const_t<T>>::type;
}

namespace detail {

template <class V>
constexpr std::size_t rank_of() {
  return static_cast<std::size_t>(V::traits::rank);
}

/// The CUDA device Kokkos runs on (what a tensor over its memory must say).
inline c10::DeviceIndex kokkos_device_index() {
#if defined(KOKKOS_ENABLE_CUDA)
  return static_cast<c10::DeviceIndex>(Kokkos::Cuda().cuda_device());
#else
  return -1;
#endif
}

template <class Space>
c10::Device device_of_space() {
  if constexpr (SpaceTraits<Space>::device == c10::DeviceType::CUDA) {
    return {c10::DeviceType::CUDA, kokkos_device_index()};
  } else {
    return {c10::DeviceType::CPU};
  }
}

/// Tensors created by to_tensor and not yet released. A Kokkos allocation
/// freed after Kokkos::finalize is an error, so KokkosRuntime reports any
/// still alive when it finalises.
inline std::atomic<std::int64_t>& live_shared_tensors() noexcept {
  static std::atomic<std::int64_t> count{0};
  return count;
}

inline std::string shape_string(c10::IntArrayRef values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

template <class V>
std::string view_description() {
  using Value = typename V::value_type;
  return std::string("Kokkos::View<") + (std::is_const_v<Value> ? "const " : "") +
         ScalarTraits<std::remove_const_t<Value>>::name + ", rank " + std::to_string(rank_of<V>()) + ", " +
         LayoutTraits<typename V::array_layout>::name + ", " + SpaceTraits<typename V::memory_space>::name + ">";
}

[[noreturn]] inline void conversion_error(const std::string& call, const std::string& what, const std::string& remedy) {
  throw ConversionError(call + ": " + what + ". " + remedy);
}

/// Strides (in elements) a dense tensor of `sizes` has in row-major or column-major order.
inline std::vector<std::int64_t> dense_strides(c10::IntArrayRef sizes, bool column_major) {
  std::vector<std::int64_t> strides(sizes.size());
  std::int64_t step = 1;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::size_t d = column_major ? k : sizes.size() - 1 - k;
    strides[d] = step;
    step *= std::max<std::int64_t>(sizes[d], 1);
  }
  return strides;
}

/// First dimension (of extent > 1) where the strides differ, or -1. A
/// dimension of extent 0 or 1 never moves the address, so its stride is free.
inline int first_stride_mismatch(c10::IntArrayRef sizes, c10::IntArrayRef actual, c10::IntArrayRef wanted) {
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1 && actual[d] != wanted[d]) return static_cast<int>(d);
  }
  return -1;
}

}  // namespace detail

/// The view's memory as a tensor on the matching device (HostSpace: cpu;
/// CUDA spaces: Kokkos' CUDA device), with the view's extents, strides and
/// dtype. No copy: writes through either are seen by the other. The tensor
/// holds a reference to the view's allocation, so the memory lives until both
/// the view and every tensor sharing it are gone; an unmanaged view owns
/// nothing, and neither does the tensor made from it. A view of no elements
/// gives an empty tensor of the same shape.
///
/// Release every such tensor before Kokkos is finalised (KokkosRuntime).
template <ShareableView V>
at::Tensor to_tensor(const V& view) {
  using Value = typename V::value_type;
  constexpr std::size_t rank = detail::rank_of<V>();
  std::array<std::int64_t, rank == 0 ? 1 : rank> sizes{};
  std::array<std::int64_t, rank == 0 ? 1 : rank> strides{};
  for (std::size_t r = 0; r < rank; ++r) {
    sizes[r] = static_cast<std::int64_t>(view.extent(r));
    strides[r] = static_cast<std::int64_t>(view.stride(r));
  }
  const c10::IntArrayRef size_ref(sizes.data(), rank);
  const c10::IntArrayRef stride_ref(strides.data(), rank);
  const auto options =
      at::TensorOptions().dtype(dtype_of<Value>()).device(detail::device_of_space<typename V::memory_space>());
  if (view.size() == 0 || view.data() == nullptr) {
    return at::empty(size_ref, options);
  }
  auto* data = const_cast<std::remove_const_t<Value>*>(view.data());
  // The deleter owns a copy of the view handle: Kokkos' reference count keeps
  // the allocation alive until LibTorch releases the tensor's storage.
  ++detail::live_shared_tensors();
  return at::from_blob(
      data, size_ref, stride_ref,
      [keep = view](void*) mutable {
        keep = V();
        --detail::live_shared_tensors();
      },
      options);
}

/// An unmanaged view of type V over the tensor's memory. The tensor (or
/// another tensor sharing its storage) must outlive the view: a Kokkos view
/// cannot hold a reference to LibTorch's storage.
///
/// Requirements, each checked with a ConversionError naming the mismatch:
/// defined tensor; dtype equal to V's value type; tensor.dim() == V's rank;
/// compile-time extents of V equal to the tensor's; tensor on V's device;
/// strides: row-major dense for LayoutRight, column-major dense for
/// LayoutLeft, any non-overlapping strides for LayoutStride.
template <ShareableView V>
V to_view(const at::Tensor& tensor) {
  using Value = typename V::value_type;
  using Layout = typename V::array_layout;
  using Space = typename V::memory_space;
  constexpr std::size_t rank = detail::rank_of<V>();
  const std::string call = "to_view<" + detail::view_description<V>() + ">";

  if (!tensor.defined()) {
    detail::conversion_error(call, "the tensor is undefined", "Pass a tensor that holds data");
  }
  if (tensor.scalar_type() != dtype_of<Value>()) {
    detail::conversion_error(call,
                             std::string("the tensor's dtype is ") + c10::toString(tensor.scalar_type()) +
                                 " but the view's value type " +
                                 detail::ScalarTraits<std::remove_const_t<Value>>::name + " needs " +
                                 c10::toString(dtype_of<Value>()),
                             "Convert the tensor first (tensor.to(dtype), a copy) or request a view of the "
                             "matching value type");
  }
  if (static_cast<std::size_t>(tensor.dim()) != rank) {
    detail::conversion_error(call,
                             "the tensor has " + std::to_string(tensor.dim()) + " dimensions " +
                                 detail::shape_string(tensor.sizes()) + " but the view has rank " +
                                 std::to_string(rank),
                             tensor.dim() > 8 ? "Kokkos views have at most 8 dimensions; reshape the tensor"
                                              : "Request a view of the tensor's rank, or reshape the tensor");
  }
  for (std::size_t r = V::traits::rank_dynamic; r < rank; ++r) {
    const auto fixed = static_cast<std::int64_t>(V::static_extent(static_cast<unsigned>(r)));
    if (tensor.size(static_cast<std::int64_t>(r)) != fixed) {
      detail::conversion_error(call,
                               "dimension " + std::to_string(r) + " of the tensor " +
                                   detail::shape_string(tensor.sizes()) + " has extent " +
                                   std::to_string(tensor.size(static_cast<std::int64_t>(r))) +
                                   " but the view type fixes it at " + std::to_string(fixed),
                               "Request a view type with a run-time extent there, or pass a tensor of that shape");
    }
  }
  const c10::Device wanted_device = detail::device_of_space<Space>();
  if (tensor.device().type() != wanted_device.type() ||
      (wanted_device.has_index() && tensor.device().index() != wanted_device.index())) {
    detail::conversion_error(call,
                             "the tensor is on " + tensor.device().str() + " but " + detail::SpaceTraits<Space>::name +
                                 " memory is addressed from " + wanted_device.str(),
                             "Move the tensor first (tensor.to(device), a copy) or request a view in the "
                             "memory space of the tensor's device");
  }

  const auto sizes = tensor.sizes();
  const auto strides = tensor.strides();
  if constexpr (std::is_same_v<Layout, Kokkos::LayoutStride>) {
    for (std::size_t d = 0; d < rank; ++d) {
      if (sizes[d] > 1 && strides[d] == 0) {
        detail::conversion_error(call,
                                 "dimension " + std::to_string(d) + " of the tensor " + detail::shape_string(sizes) +
                                     " has stride 0 (an expanded tensor: elements overlap)",
                                 "Views need one element per address: materialise the tensor (tensor.contiguous(), "
                                 "a copy) first");
      }
    }
  } else {
    constexpr bool column_major = std::is_same_v<Layout, Kokkos::LayoutLeft>;
    const auto wanted = detail::dense_strides(sizes, column_major);
    const int bad = detail::first_stride_mismatch(sizes, strides, wanted);
    if (bad >= 0) {
      detail::conversion_error(
          call,
          "the tensor " + detail::shape_string(sizes) + " has strides " + detail::shape_string(strides) + " but " +
              detail::LayoutTraits<Layout>::name + " needs " + detail::shape_string(wanted) + " (dimension " +
              std::to_string(bad) + " differs)",
          column_major ? "Request a Kokkos::LayoutStride view, or pass a column-major tensor (e.g. the .t() of a "
                         "contiguous one)"
                       : "Request a Kokkos::LayoutStride view, or make the tensor contiguous (tensor.contiguous(), "
                         "a copy) first");
    }
  }

  Layout layout;  // unused dimensions keep the layout's defaults
  for (std::size_t d = 0; d < rank; ++d) {
    layout.dimension[d] = static_cast<std::size_t>(sizes[d]);
    if constexpr (std::is_same_v<Layout, Kokkos::LayoutStride>) layout.stride[d] = static_cast<std::size_t>(strides[d]);
  }
  using Pointer = typename V::pointer_type;
  V view(static_cast<Pointer>(tensor.data_ptr()), layout);
  for (std::size_t d = 0; d < rank; ++d) {
    if (sizes[d] > 1 && static_cast<std::int64_t>(view.stride(d)) != strides[d]) {
      detail::conversion_error(call,
                               "Kokkos laid the view out with stride " + std::to_string(view.stride(d)) +
                                   " in dimension " + std::to_string(d) + " where the tensor has " +
                                   std::to_string(strides[d]),
                               "Request a Kokkos::LayoutStride view");
    }
  }
  return view;
}

/// A new contiguous (row-major) tensor on the view's device holding a copy
/// of its values; the view is not referenced afterwards.
template <ShareableView V>
at::Tensor copy_to_tensor(const V& view) {
  return to_tensor(view).clone(at::MemoryFormat::Contiguous);
}

/// Copies the tensor's values into `view` (any layout), converting dtype and
/// device as Tensor::copy_ does. The shapes must be equal.
template <ShareableView V>
requires(!std::is_const_v<typename V::value_type>) void copy_to_view(const at::Tensor& tensor, const V& view) {
  at::Tensor target = to_tensor(view);
  if (!tensor.defined() || tensor.sizes() != target.sizes()) {
    detail::conversion_error("copy_to_view<" + detail::view_description<V>() + ">",
                             "the tensor's shape " +
                                 (tensor.defined() ? detail::shape_string(tensor.sizes())
                                                   : std::string("(undefined)")) +
                                 " differs from the view's " + detail::shape_string(target.sizes()),
                             "Pass a tensor of the view's shape (reshape or slice it first)");
  }
  target.copy_(tensor);
}

}  // namespace accelerate::kokkos
