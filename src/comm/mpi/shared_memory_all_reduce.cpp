#include "comm/mpi/shared_memory_all_reduce.hpp"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/NumericUtils.h>
#include <ATen/OpMathType.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "comm/mpi/mpi_work.hpp"
#include "detail/mpi_check.hpp"
#include "detail/mpi_wait.hpp"

namespace accelerate::detail {
namespace {

// A rank's region: its counter alone on the first page (no false sharing
// with the slots), then its two slots.
constexpr std::size_t kCounterBytes = 4096;
constexpr std::size_t kRegionBytes = kCounterBytes + 2 * SharedMemoryAllReduce::kChunkBytes;
// Slices start on cache-line boundaries, so two ranks never write one line.
constexpr int64_t kSliceAlignBytes = 64;

// Maps the node's segment of `bytes`, one part of `part` bytes per local
// rank: local rank 0 creates it, the others open it by name, and it is
// unlinked once all have mapped it. Each rank allocates its own part
// (posix_fallocate), so tmpfs places that part's pages by the rank's own
// memory policy: on its NUMA node. Allocating, not only sizing, makes a
// /dev/shm too small for the segment an error now, not a SIGBUS at the
// first touch. Returns nullptr where any step failed on this rank.
void* map_segment(MPI_Comm node, int local_rank, std::size_t bytes, std::size_t part) {
  static int made = 0;
  char name[64] = {};
  int fd = -1;
  if (local_rank == 0) {
    std::snprintf(name, sizeof(name), "/accelerate-hpc-%d-%d", static_cast<int>(getpid()), made++);
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      close(fd);
      shm_unlink(name);
      fd = -1;
    }
    if (fd < 0) name[0] = '\0';
  }
  ACCELERATE_MPI_CHECK(MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, node));
  if (local_rank != 0 && name[0] != '\0') fd = shm_open(name, O_RDWR, 0);
  const auto offset = static_cast<off_t>(part * static_cast<std::size_t>(local_rank));
  if (fd >= 0 && posix_fallocate(fd, offset, static_cast<off_t>(part)) != 0) {
    close(fd);
    fd = -1;
  }
  void* mapping = nullptr;
  if (fd >= 0) {
    mapping = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (mapping == MAP_FAILED) mapping = nullptr;
  }
  ACCELERATE_MPI_CHECK(MPI_Barrier(node));
  if (local_rank == 0 && name[0] != '\0') shm_unlink(name);
  return mapping;
}

}  // namespace

// The memory of one tensor from make_buffer(): this rank's part of a segment
// where every rank of the node has a part of the same size, `stride` bytes
// apart. The tensor's storage owns it; dropping the last reference unmaps
// the segment on this rank alone.
struct NodeBuffer {
  uint64_t owner = 0;  // SharedMemoryAllReduce::id_ of its maker
  std::byte* mapping = nullptr;
  std::size_t mapping_bytes = 0;
  std::size_t stride = 0;
  std::size_t bytes = 0;  // of the tensor
  int local_rank = 0;

  [[nodiscard]] std::byte* of(int rank) const { return mapping + stride * static_cast<std::size_t>(rank); }
  ~NodeBuffer() {
    if (mapping != nullptr) munmap(mapping, mapping_bytes);
  }
};

namespace {

void release_node_buffer(void* context) { delete static_cast<NodeBuffer*>(context); }

// Below this many bytes a loop beats ATen's dispatch, which costs about a
// microsecond per call.
constexpr int64_t kLoopBytes = 4096;

// NaN wins a minimum or maximum, as in at::minimum/at::maximum (the
// vectorised path). For bool, + and * are OR and AND, as in MPI's table.
template <typename T>
T minimum_of(T a, T b) {
  if (at::_isnan(a)) return a;
  if (at::_isnan(b)) return b;
  return b < a ? b : a;
}

template <typename T>
T maximum_of(T a, T b) {
  if (at::_isnan(a)) return a;
  if (at::_isnan(b)) return b;
  return a < b ? b : a;
}

// One loop per operation, so that the compiler can vectorise each
// (CMakeLists.txt gives this file a cost model that lets it). `out` may be
// `a` (element-wise in place).
template <typename T, typename Combine>
void combine_each(T* out, const T* a, const T* b, int64_t count, Combine combine) {
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(combine(a[i], b[i]));
}

void combine_loop(void* out, const void* a, const void* b, int64_t count, c10::ScalarType dtype, ReduceOp op) {
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, dtype, "shared_memory_all_reduce", [&] {
    auto* o = static_cast<scalar_t*>(out);
    const auto* x = static_cast<const scalar_t*>(a);
    const auto* y = static_cast<const scalar_t*>(b);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: combine_each(o, x, y, count, [](scalar_t p, scalar_t q) { return p + q; }); break;
      case ReduceOp::Product: combine_each(o, x, y, count, [](scalar_t p, scalar_t q) { return p * q; }); break;
      case ReduceOp::Min: combine_each(o, x, y, count, minimum_of<scalar_t>); break;
      case ReduceOp::Max: combine_each(o, x, y, count, maximum_of<scalar_t>); break;
    }
  });
}

void divide_loop(void* data, int64_t count, c10::ScalarType dtype, int divisor) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "shared_memory_all_reduce_avg", [&] {
    auto* values = static_cast<scalar_t*>(data);
    // In float at least: bfloat16 holds integers exactly only up to 256.
    using Math = at::opmath_type<scalar_t>;
    const auto by = static_cast<Math>(divisor);
    for (int64_t i = 0; i < count; ++i) values[i] = static_cast<scalar_t>(static_cast<Math>(values[i]) / by);
  });
}

void combine(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, ReduceOp op) {
  if (out.numel() * static_cast<int64_t>(out.element_size()) <= kLoopBytes) {
    combine_loop(out.data_ptr(), a.data_ptr(), b.data_ptr(), out.numel(), out.scalar_type(), op);
    return;
  }
  // As MPI's table (mpi_types.cpp): bool sums and maxima are OR, the rest AND.
  if (out.scalar_type() == at::kBool) {
    if (op == ReduceOp::Sum || op == ReduceOp::Max) {
      at::logical_or_out(out, a, b);
    } else {
      at::logical_and_out(out, a, b);
    }
    return;
  }
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: at::add_out(out, a, b); return;
    case ReduceOp::Product: at::mul_out(out, a, b); return;
    case ReduceOp::Min: at::minimum_out(out, a, b); return;
    case ReduceOp::Max: at::maximum_out(out, a, b); return;
  }
}

}  // namespace

std::unique_ptr<SharedMemoryAllReduce> SharedMemoryAllReduce::create(MPI_Comm comm, int node) {
  static std::atomic<uint64_t> made{0};
  int rank = 0;
  int size = 1;
  ACCELERATE_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ACCELERATE_MPI_CHECK(MPI_Comm_size(comm, &size));
  if (size < 2) return nullptr;
  std::unique_ptr<SharedMemoryAllReduce> self(new SharedMemoryAllReduce());
  self->group_size_ = size;
  self->group_ = comm;
  self->id_ = ++made;
  ACCELERATE_MPI_CHECK(MPI_Comm_split(comm, node, rank, self->node_.out()));
  ACCELERATE_MPI_CHECK(MPI_Comm_rank(self->node_.get(), &self->local_rank_));
  ACCELERATE_MPI_CHECK(MPI_Comm_size(self->node_.get(), &self->local_size_));
  // The hierarchical step pairs slice owners across nodes: every node must
  // cut the chunk the same way, so every node needs the same rank count.
  int extremes[2] = {self->local_size_, -self->local_size_};
  ACCELERATE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_INT, MPI_MAX, comm));
  if (extremes[0] != -extremes[1] || self->local_size_ < 2) return nullptr;
  self->node_count_ = size / self->local_size_;
  // Ranks beyond the cores (mpirun --oversubscribe): yield at once, or a
  // waiter spins away the time slice of the rank it waits for.
  if (static_cast<unsigned>(self->local_size_) > std::thread::hardware_concurrency()) self->spins_ = 1;
  ACCELERATE_MPI_CHECK(MPI_Comm_split(comm, self->local_rank_, rank, self->cross_.out()));
  self->group_rank_.resize(static_cast<std::size_t>(self->local_size_));
  ACCELERATE_MPI_CHECK(MPI_Allgather(&rank, 1, MPI_INT, self->group_rank_.data(), 1, MPI_INT, self->node_.get()));

  self->mapping_bytes_ = kRegionBytes * static_cast<std::size_t>(self->local_size_);
  self->mapping_ = map_segment(self->node_.get(), self->local_rank_, self->mapping_bytes_, kRegionBytes);
  if (self->mapping_ != nullptr) {
    // Zeroed by its owner (map_segment placed it on the owner's NUMA node).
    std::memset(static_cast<std::byte*>(self->mapping_) + kRegionBytes * static_cast<std::size_t>(self->local_rank_), 0,
                kRegionBytes);
  }
  int mapped = self->mapping_ != nullptr ? 1 : 0;
  ACCELERATE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &mapped, 1, MPI_INT, MPI_MIN, comm));
  if (mapped == 0) return nullptr;  // the destructor unmaps where it did map
  return self;
}

SharedMemoryAllReduce::~SharedMemoryAllReduce() {
  // A request that timed out may still write into a slot.
  if (mapping_ != nullptr && !request_pending_) munmap(mapping_, mapping_bytes_);
}

std::byte* SharedMemoryAllReduce::slot(int local_rank, uint64_t round) const {
  return static_cast<std::byte*>(mapping_) + kRegionBytes * static_cast<std::size_t>(local_rank) + kCounterBytes +
         kChunkBytes * (round % 2);
}

uint64_t& SharedMemoryAllReduce::counter(int local_rank) const {
  return *reinterpret_cast<uint64_t*>(static_cast<std::byte*>(mapping_) +
                                      kRegionBytes * static_cast<std::size_t>(local_rank));
}

bool SharedMemoryAllReduce::synchronise(const Waiting& waiting, std::string& missing) {
  ++steps_;
  // Release: this rank's writes to its slot are visible to whoever acquires
  // the counter's new value.
  std::atomic_ref<uint64_t>(counter(local_rank_)).store(steps_, std::memory_order_release);
  const auto arrived = [this] {
    for (int r = 0; r < local_size_; ++r) {
      if (std::atomic_ref<uint64_t>(counter(r)).load(std::memory_order_acquire) < steps_) return false;
    }
    return true;
  };
  if (poll_until(waiting.deadline, arrived, waiting.while_waiting_long, spins_)) return true;
  broken_ = true;
  for (int r = 0; r < local_size_; ++r) {
    const uint64_t reached = std::atomic_ref<uint64_t>(counter(r)).load(std::memory_order_acquire);
    if (reached >= steps_) continue;
    if (!missing.empty()) missing += ", ";
    missing += std::to_string(group_rank_[static_cast<std::size_t>(r)]) +
               (reached <= entry_step_ ? " (never entered this all-reduce)" : " (stopped inside this all-reduce)");
  }
  return false;
}

bool SharedMemoryAllReduce::reduce_slice(std::byte* chunk, int64_t begin, int64_t end, const at::TensorOptions& options,
                                         ReduceOp op, MPI_Datatype type, MPI_Op mpi_op, const Waiting& waiting) {
  const int64_t element = static_cast<int64_t>(options.dtype().itemsize());
  const auto source = [&](int r) {
    std::byte* base = r == local_rank_ ? chunk : slot(r, rounds_);
    return at::from_blob(base + begin * element, {end - begin}, options);
  };
  // The result goes where this rank's own data was not copied: its slot's
  // slice. Every rank adds in rank order, so the result does not depend on
  // which rank owns the slice.
  at::Tensor out = at::from_blob(slot(local_rank_, rounds_) + begin * element, {end - begin}, options);
  combine(out, source(0), source(1), op);
  for (int r = 2; r < local_size_; ++r) combine(out, out, source(r), op);
  if (!reduce_across_nodes(out.data_ptr(), end - begin, type, mpi_op, waiting)) return false;
  if (op == ReduceOp::Avg) out.div_(group_size_);
  return true;
}

bool SharedMemoryAllReduce::reduce_across_nodes(void* data, int64_t count, MPI_Datatype type, MPI_Op mpi_op,
                                                const Waiting& waiting) {
  if (node_count_ == 1) return true;
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(
      MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, mpi_op, cross_.get(), &request));
  const auto done = [&request] {
    int flag = 0;
    ACCELERATE_MPI_CHECK(MPI_Test(&request, &flag, MPI_STATUS_IGNORE));
    return flag != 0;
  };
  if (poll_until(waiting.deadline, done, waiting.while_waiting_long, spins_)) return true;
  // The request may still complete when a late node arrives and write into
  // `data`: run() keeps that memory, and the slots stay mapped.
  broken_ = true;
  request_pending_ = true;
  abandon(cross_.get());
  return false;
}

bool SharedMemoryAllReduce::reduce_whole(at::Tensor& tensor, ReduceOp op, MPI_Datatype type, MPI_Op mpi_op,
                                         const Waiting& waiting, std::string& missing) {
  const int64_t count = tensor.numel();
  const auto bytes = static_cast<std::size_t>(count) * tensor.element_size();
  std::memcpy(slot(local_rank_, rounds_), tensor.data_ptr(), bytes);
  if (!synchronise(waiting, missing)) return false;
  // Every rank combines the slots in rank order into its own tensor: one
  // result everywhere. No second synchronisation: the next call writes the
  // other slot, and the one after waits in its own synchronisation for
  // every rank to have finished reading this one.
  const auto dtype = tensor.scalar_type();
  combine_loop(tensor.data_ptr(), slot(0, rounds_), slot(1, rounds_), count, dtype, op);
  for (int r = 2; r < local_size_; ++r)
    combine_loop(tensor.data_ptr(), tensor.data_ptr(), slot(r, rounds_), count, dtype, op);
  ++rounds_;
  if (!reduce_across_nodes(tensor.data_ptr(), count, type, mpi_op, waiting)) return false;
  if (op == ReduceOp::Avg) divide_loop(tensor.data_ptr(), count, dtype, group_size_);
  return true;
}

SharedMemoryAllReduce::Outcome SharedMemoryAllReduce::in_rounds(int64_t block, int64_t width, const Waiting& waiting,
                                                                const std::function<void(int64_t, int64_t)>& fill,
                                                                const std::function<void(int64_t, int64_t)>& use) {
  entry_step_ = steps_;
  Outcome outcome;
  for (int64_t offset = 0; offset < block; offset += width, ++rounds_) {
    const int64_t count = std::min(width, block - offset);
    fill(offset, count);
    outcome.completed = synchronise(waiting, outcome.missing);
    if (!outcome.completed) return outcome;
    use(offset, count);
  }
  return outcome;
}

SharedMemoryAllReduce::Outcome SharedMemoryAllReduce::reduce_scatter(at::Tensor& output, const at::Tensor& input,
                                                                     ReduceOp op, const Waiting& waiting) {
  const auto options = output.options();
  const int64_t element = static_cast<int64_t>(output.element_size());
  const int64_t block = output.numel();
  const auto* in = static_cast<const std::byte*>(input.data_ptr());
  auto* out = static_cast<std::byte*>(output.data_ptr());
  // Each round carries `count` elements of every block, n × count in a slot:
  // the other ranks' blocks, since this rank reads its own where it is.
  const auto fill = [&](int64_t offset, int64_t count) {
    const auto bytes = static_cast<std::size_t>(count * element);
    std::byte* mine = slot(local_rank_, rounds_);
    for (int b = 0; b < local_size_; ++b) {
      if (b != local_rank_) std::memcpy(mine + b * bytes, in + (b * block + offset) * element, bytes);
    }
  };
  // This rank's block from every rank, reduced in rank order into the output.
  const auto use = [&](int64_t offset, int64_t count) {
    const auto bytes = static_cast<std::size_t>(count * element);
    const auto source = [&](int r) -> const std::byte* {
      if (r == local_rank_) return in + (local_rank_ * block + offset) * element;
      return slot(r, rounds_) + static_cast<std::size_t>(local_rank_) * bytes;
    };
    const auto view = [&](const std::byte* base) {
      return at::from_blob(const_cast<std::byte*>(base), {count}, options);
    };
    at::Tensor result = view(out + offset * element);
    combine(result, view(source(0)), view(source(1)), op);
    for (int r = 2; r < local_size_; ++r) combine(result, result, view(source(r)), op);
  };
  const int64_t width = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes) / (element * local_size_));
  const Outcome outcome = in_rounds(block, width, waiting, fill, use);
  if (outcome.completed && op == ReduceOp::Avg) output.div_(group_size_);
  return outcome;
}

SharedMemoryAllReduce::Outcome SharedMemoryAllReduce::all_gather(at::Tensor& output, const at::Tensor& input,
                                                                 const Waiting& waiting) {
  const int64_t element = static_cast<int64_t>(input.element_size());
  const int64_t block = input.numel();
  const auto* in = static_cast<const std::byte*>(input.data_ptr());
  auto* out = static_cast<std::byte*>(output.data_ptr());
  // Each round: this rank's `count` elements into its slot, then every
  // rank's out of the slots (its own from where it is).
  const auto fill = [&](int64_t offset, int64_t count) {
    std::memcpy(slot(local_rank_, rounds_), in + offset * element, static_cast<std::size_t>(count * element));
  };
  const auto use = [&](int64_t offset, int64_t count) {
    for (int r = 0; r < local_size_; ++r) {
      const std::byte* source = r == local_rank_ ? in + offset * element : slot(r, rounds_);
      std::memcpy(out + (r * block + offset) * element, source, static_cast<std::size_t>(count * element));
    }
  };
  return in_rounds(block, std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes) / element), waiting, fill, use);
}

at::Tensor SharedMemoryAllReduce::make_buffer(int64_t numel, const at::TensorOptions& options) {
  const std::size_t page = 4096;
  auto buffer = std::make_unique<NodeBuffer>();
  buffer->owner = id_;
  buffer->local_rank = local_rank_;
  buffer->bytes = static_cast<std::size_t>(numel) * options.dtype().itemsize();
  // Whole pages per rank: map_segment places each on its owner's NUMA node,
  // and no two ranks write one cache line.
  buffer->stride = std::max(page, (buffer->bytes + page - 1) / page * page);
  buffer->mapping_bytes = buffer->stride * static_cast<std::size_t>(local_size_);
  buffer->mapping =
      static_cast<std::byte*>(map_segment(node_.get(), local_rank_, buffer->mapping_bytes, buffer->stride));
  if (buffer->mapping != nullptr) std::memset(buffer->of(local_rank_), 0, buffer->stride);
  // Every rank of the group takes the same path for this buffer's
  // all-reduces, or none does: the two paths synchronise differently.
  int mapped = buffer->mapping != nullptr ? 1 : 0;
  ACCELERATE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &mapped, 1, MPI_INT, MPI_MIN, group_));
  if (mapped == 0) return {};  // unmapped where it was mapped
  std::byte* data = buffer->of(local_rank_);
  const auto bytes = buffer->bytes;
  c10::DataPtr memory(data, buffer.release(), &release_node_buffer, c10::Device(c10::kCPU));
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, std::move(memory), nullptr, false);
  // Only the dtype is taken from `options`: requires_grad is set after set_
  // (which a leaf that requires grad refuses), and the memory is our own.
  at::Tensor tensor = at::empty({0}, at::TensorOptions().dtype(options.dtype())).set_(storage, 0, {numel}, {1});
  if (options.requires_grad()) tensor.requires_grad_(true);
  return tensor;
}

const NodeBuffer* SharedMemoryAllReduce::whole_buffer(const at::Tensor& tensor) const {
  const auto& memory = tensor.storage().data_ptr();
  if (memory.get_deleter() != &release_node_buffer) return nullptr;
  const auto* buffer = static_cast<const NodeBuffer*>(memory.get_context());
  const bool whole = buffer->owner == id_ && tensor.data_ptr() == buffer->of(local_rank_) && tensor.is_contiguous() &&
                     static_cast<std::size_t>(tensor.numel()) * tensor.element_size() == buffer->bytes;
  return whole && buffer->bytes > kWholeMessageBytes ? buffer : nullptr;
}

SharedMemoryAllReduce::Outcome SharedMemoryAllReduce::reduce_in_buffers(const NodeBuffer& buffer,
                                                                        const at::Tensor& tensor, ReduceOp op,
                                                                        MPI_Datatype type, MPI_Op mpi_op,
                                                                        const Waiting& waiting) {
  const auto dtype = tensor.scalar_type();
  const auto element = static_cast<int64_t>(tensor.element_size());
  const int64_t total = tensor.numel();
  const int64_t align = std::max<int64_t>(1, kSliceAlignBytes / element);
  int64_t slice = (total + local_size_ - 1) / local_size_;
  slice = (slice + align - 1) / align * align;
  const auto begin_of = [&](int r) { return std::min<int64_t>(slice * r, total); };
  const auto end_of = [&](int r) { return std::min<int64_t>(begin_of(r) + slice, total); };
  const auto at_element = [&](int r, int64_t index) { return buffer.of(r) + index * element; };
  std::byte* mine = buffer.of(local_rank_);
  ++reduced_in_buffers_;
  Outcome outcome;
  // 1. Every rank's buffer holds its contribution.
  outcome.completed = synchronise(waiting, outcome.missing);
  if (!outcome.completed) return outcome;
  // This rank's slice from every buffer, combined in rank order, block by
  // block, into its own buffer: the result does not depend on which rank
  // owns the slice. Ranks 0 and 1 may write in place (element i is read
  // before it is written); a later rank's own data is an operand after the
  // first combination, so its blocks go through a scratch in L1.
  constexpr int64_t kBlockBytes = 16 * 1024;
  alignas(64) std::byte scratch[kBlockBytes];
  const int64_t block = kBlockBytes / element;
  const bool divide_here = op == ReduceOp::Avg && node_count_ == 1;
  const int64_t begin = begin_of(local_rank_);
  const int64_t end = end_of(local_rank_);
  for (int64_t from = begin; from < end; from += block) {
    const int64_t count = std::min(block, end - from);
    void* out = local_rank_ < 2 ? static_cast<void*>(at_element(local_rank_, from)) : static_cast<void*>(scratch);
    combine_loop(out, at_element(0, from), at_element(1, from), count, dtype, op);
    for (int r = 2; r < local_size_; ++r) combine_loop(out, out, at_element(r, from), count, dtype, op);
    if (out == scratch) std::memcpy(at_element(local_rank_, from), scratch, static_cast<std::size_t>(count * element));
    if (divide_here) divide_loop(at_element(local_rank_, from), count, dtype, group_size_);
  }
  if (end > begin && node_count_ > 1) {
    if (!reduce_across_nodes(at_element(local_rank_, begin), end - begin, type, mpi_op, waiting)) {
      outcome.completed = false;
      return outcome;
    }
    if (op == ReduceOp::Avg) divide_loop(at_element(local_rank_, begin), end - begin, dtype, group_size_);
  }
  // 2. Every slice is reduced: copy the others' into this buffer.
  outcome.completed = synchronise(waiting, outcome.missing);
  if (!outcome.completed) return outcome;
  for (int r = 0; r < local_size_; ++r) {
    if (r == local_rank_) continue;
    const int64_t from = begin_of(r);
    std::memcpy(mine + from * element, at_element(r, from), static_cast<std::size_t>((end_of(r) - from) * element));
  }
  // 3. No rank reads this buffer any more: the caller may write it again.
  outcome.completed = synchronise(waiting, outcome.missing);
  return outcome;
}

SharedMemoryAllReduce::Outcome SharedMemoryAllReduce::run(at::Tensor& tensor, ReduceOp op, MPI_Datatype type,
                                                          MPI_Op mpi_op, const Waiting& waiting) {
  Outcome outcome = run_steps(tensor, op, type, mpi_op, waiting);
  // The tensor's memory (a buffer's segment, or the tensor itself for a
  // small message) may be the target of the request left pending.
  if (request_pending_) keep_until_exit({tensor});
  return outcome;
}

SharedMemoryAllReduce::Outcome SharedMemoryAllReduce::run_steps(at::Tensor& tensor, ReduceOp op, MPI_Datatype type,
                                                                MPI_Op mpi_op, const Waiting& waiting) {
  entry_step_ = steps_;
  const auto options = tensor.options();
  const int64_t element = static_cast<int64_t>(tensor.element_size());
  const int64_t chunk_elements = static_cast<int64_t>(kChunkBytes) / element;
  const int64_t align = std::max<int64_t>(1, kSliceAlignBytes / element);
  const int64_t total = tensor.numel();
  auto* data = static_cast<std::byte*>(tensor.data_ptr());
  if (const NodeBuffer* buffer = whole_buffer(tensor))
    return reduce_in_buffers(*buffer, tensor, op, type, mpi_op, waiting);
  Outcome outcome;
  if (total > 0 && static_cast<std::size_t>(total * element) <= kWholeMessageBytes) {
    outcome.completed = reduce_whole(tensor, op, type, mpi_op, waiting, outcome.missing);
    return outcome;
  }
  for (int64_t offset = 0; offset < total; offset += chunk_elements, ++rounds_) {
    const int64_t count = std::min(chunk_elements, total - offset);
    int64_t slice = (count + local_size_ - 1) / local_size_;
    slice = (slice + align - 1) / align * align;
    const auto begin_of = [&](int r) { return std::min<int64_t>(slice * r, count); };
    const auto end_of = [&](int r) { return std::min<int64_t>(begin_of(r) + slice, count); };
    std::byte* chunk = data + offset * element;
    std::byte* mine = slot(local_rank_, rounds_);
    const int64_t begin = begin_of(local_rank_);
    const int64_t end = end_of(local_rank_);
    // Copy in all but this rank's own slice, which it reads where it is.
    std::memcpy(mine, chunk, static_cast<std::size_t>(begin * element));
    std::memcpy(mine + end * element, chunk + end * element, static_cast<std::size_t>((count - end) * element));
    outcome.completed = synchronise(waiting, outcome.missing);
    if (!outcome.completed) return outcome;
    if (end > begin) {
      outcome.completed = reduce_slice(chunk, begin, end, options, op, type, mpi_op, waiting);
      if (!outcome.completed) return outcome;
    }
    outcome.completed = synchronise(waiting, outcome.missing);
    if (!outcome.completed) return outcome;
    for (int r = 0; r < local_size_; ++r) {
      const int64_t from = begin_of(r);
      std::memcpy(chunk + from * element, slot(r, rounds_) + from * element,
                  static_cast<std::size_t>((end_of(r) - from) * element));
    }
  }
  return outcome;
}

}  // namespace accelerate::detail
