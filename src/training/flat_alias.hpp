// A tensor over another's storage that autograd does not see as a view: the
// one way the flat-storage pieces (ShardedOptimizer, FlatParameters) point a
// parameter, a .grad or a state tensor at a range of a flat buffer (and
// FullyShardedModel a parameter or a shard at a range of its unit).
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace accelerate::training_detail {

/// A tensor over `base`'s storage from `offset` (elements, relative to
/// `base`'s own offset), contiguous with `sizes`, that autograd does not track
/// as a view of `base`: it can be a parameter's data, an optimizer's
/// parameter or a .grad that optimizers detach_() in place.
inline at::Tensor alias_of(const at::Tensor& base, std::int64_t offset, at::IntArrayRef sizes) {
  std::vector<std::int64_t> strides(sizes.size(), 1);
  for (std::size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  at::Tensor alias = at::empty({0}, base.options());
  alias.set_(base.storage(), base.storage_offset() + offset, sizes, strides);
  return alias;
}

}  // namespace accelerate::training_detail
