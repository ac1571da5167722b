// Backend: the collective operations on one communicator and one device kind.
//
// MpiBackend carries CPU tensors, NcclBackend CUDA tensors; ProcessGroup
// routes each call by the tensor's device. The interface is deliberately
// narrow: one tensor per call, dimension 0 is the "rank" dimension for the
// gather/scatter family, and results land in caller-provided outputs.
//
// Shapes (n = group size):
//   all_reduce      tensor (in place)
//   broadcast       tensor (in place; input on root, output elsewhere)
//   all_gather      input [k, …]          -> output [n*k, …]
//   all_gather_v    input [k_r, …]        -> output [Σk_r, …], counts[r] = k_r
//   gather          input [k, …]          -> output [n*k, …] on root (ignored elsewhere)
//   scatter         input [n*k, …] on root -> output [k, …]
//   reduce_scatter  input [n*k, …]        -> output [k, …]
//   all_to_all      input [n*k, …]        -> output [n*k, …] (block r goes to rank r)
//
// ProcessGroup checks the arguments once, for every backend, before it
// routes a call: tensors defined and on one device, one dtype, element counts
// as above, a root that is a rank of the group, all_gather_v's counts. A
// backend checks only what is its own: the device kind it carries and what
// its library needs (contiguity for NCCL, MPI's int counts).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "accelerate/comm/types.hpp"
#include "accelerate/comm/work.hpp"

namespace accelerate {

class Backend {
 public:
  virtual ~Backend() = default;

  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  /// How all_reduce runs, for logs and tests (e.g. "shared memory (…)").
  [[nodiscard]] virtual std::string all_reduce_algorithm() const { return std::string(name()); }

  virtual std::unique_ptr<Work> all_reduce(at::Tensor& tensor, const AllReduceOptions& options) = 0;
  /// A zeroed 1-D tensor of `numel` elements that this backend all-reduces
  /// fastest, when every rank passes its own whole (ProcessGroup::
  /// all_reduce_buffer). Collective. By default plain memory.
  virtual at::Tensor make_all_reduce_buffer(int64_t numel, const at::TensorOptions& options);
  /// all_reduce for a caller that waits at once. A backend may pick a faster
  /// blocking algorithm here, provided it keeps the timeout guarantees.
  virtual void all_reduce_blocking(at::Tensor& tensor, const AllReduceOptions& options) {
    all_reduce(tensor, options)->wait();
  }
  virtual std::unique_ptr<Work> broadcast(at::Tensor& tensor, const BroadcastOptions& options) = 0;
  virtual std::unique_ptr<Work> all_gather(at::Tensor& output, const at::Tensor& input,
                                           const AllGatherOptions& options) = 0;
  virtual std::unique_ptr<Work> all_gather_v(at::Tensor& output, const at::Tensor& input,
                                             std::span<const int64_t> counts, const AllGatherOptions& options) = 0;
  virtual std::unique_ptr<Work> gather(at::Tensor& output, const at::Tensor& input, const GatherOptions& options) = 0;
  virtual std::unique_ptr<Work> scatter(at::Tensor& output, const at::Tensor& input, const ScatterOptions& options) = 0;
  virtual std::unique_ptr<Work> reduce_scatter(at::Tensor& output, const at::Tensor& input,
                                               const ReduceScatterOptions& options) = 0;
  virtual std::unique_ptr<Work> all_to_all(at::Tensor& output, const at::Tensor& input,
                                           const AllToAllOptions& options) = 0;
  virtual std::unique_ptr<Work> barrier(const BarrierOptions& options) = 0;
};

}  // namespace accelerate
