#include "accelerate/checkpoint/checkpoint_writer.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/availability.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "checkpoint/attributes.hpp"
#include "checkpoint/collective.hpp"
#include "checkpoint/hdf5_turn.hpp"
#include "checkpoint/hdf5_types.hpp"
#include "checkpoint/host_tensor.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/names.hpp"
#include "checkpoint/parallel_file.hpp"
#include "checkpoint/spare_core.hpp"
#include "checkpoint/tensor_pieces.hpp"
#include "checkpoint/timestamp.hpp"
#include "detail/blocking_call_watchdog.hpp"
#include "detail/crc32c.hpp"
#include "detail/mpi_check.hpp"

namespace accelerate::checkpoint {
using accelerate::detail::crc32c;
using accelerate::detail::crc32c_combine;

using namespace accelerate::checkpoint::detail;
using accelerate::detail::BlockingCallWatchdog;

namespace {

std::string describe(std::string_view kind, std::string_view name, c10::ScalarType dtype, at::IntArrayRef shape) {
  std::string text = std::string(kind) + " '" + std::string(name) + "' " + std::string(dtype_name(dtype)) + " [";
  for (std::size_t d = 0; d < shape.size(); ++d) text += (d ? "," : "") + std::to_string(shape[d]);
  return text + "]";
}

// Why `tensor` has no values to write, or "": a tensor on the meta device (a
// model built by init_empty_weights), or one whose storage was released (a
// FULL_SHARD parameter between uses, which only its shards hold).
std::string no_values(const at::Tensor& tensor) {
  if (tensor.is_meta()) return "it is on the meta device and has no values";
  if (tensor.numel() > 0 && tensor.storage().nbytes() == 0) {
    return "its storage holds no memory (a FULL_SHARD parameter, which only its shards hold)";
  }
  return {};
}

// The description includes a missing-values problem, so that ranks that
// differ in it are refused together by the comparison of descriptions.
std::string describe(std::string_view kind, std::string_view name, const at::Tensor& tensor) {
  const std::string problem = no_values(tensor);
  return describe(kind, name, tensor.scalar_type(), tensor.sizes()) + (problem.empty() ? "" : " (" + problem + ")");
}

void require_values(const at::Tensor& tensor, std::string_view name, const std::string& where) {
  const std::string problem = no_values(tensor);
  if (!problem.empty()) {
    throw ConfigError("checkpoint: '" + std::string(name) + "' in " + where + ": " + problem +
                      ". Load or gather its values before saving it.");
  }
}

}  // namespace

struct CheckpointWriter::Impl {
  explicit Impl(const WriterOptions& o)
      : options(o), comm(o.comm.get(), o.timeout), rank(comm.rank()), size(comm.size()) {}
  ~Impl() { close_parallel_file_quietly(file, options.comm.get(), options.timeout, options.file.string()); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Hdf5Turn turn;  // first: HDF5 is ours from before the file opens until after it closes
  WriterOptions options;
  DeadlineComm comm;  // every step the writer takes outside HDF5
  int rank = 0;
  int size = 1;
  File file;
  PropertyList transfer;
  PropertyList link_creation;
  PropertyList dataset_creation;
  std::vector<std::uint64_t> assigned_bytes;  // per rank, for whole-dataset owners
  std::uint64_t written = 0;
  bool closed = false;
  std::unique_ptr<SpareCore> spare;  // checksums beside the writes

  std::string where(std::string_view name) const { return options.file.string() + ":/" + std::string(name); }

  // Every HDF5 call of a step may be collective (a metadata-cache flush can
  // start inside any call that changes metadata: H5Dclose, an attribute, a
  // group): each public step runs whole under the watchdog, with the job's
  // timeout. Its own deadline waits still end it first, naming the ranks.
  [[nodiscard]] BlockingCallWatchdog watch(std::string_view step, std::string_view name) const {
    return BlockingCallWatchdog("checkpoint: " + std::string(step) + " of '" + where(name) + "'", options.timeout);
  }

  Dataset create_dataset(std::string_view name, hid_t type, const std::vector<hsize_t>& dims) {
    Dataspace space(dims.empty() ? H5Screate(H5S_SCALAR)
                                 : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                    where(name));
    const std::string path(name);
    const BlockingCallWatchdog watchdog("checkpoint: H5Dcreate of '" + where(name) + "'", options.timeout);
    return Dataset(H5Dcreate2(file.get(), path.c_str(), type, space.get(), link_creation.get(), dataset_creation.get(),
                              H5P_DEFAULT),
                   where(name));
  }

  void write_selection(const Dataset& dataset, hid_t type, const std::vector<hsize_t>& dims, const void* data,
                       std::int64_t count, const auto& select, std::string_view name) {
    Dataspace file_space(H5Dget_space(dataset.get()), where(name));
    select(file_space.get());
    const hsize_t memory_dims[1] = {static_cast<hsize_t>(count > 0 ? count : 1)};
    Dataspace memory_space(H5Screate_simple(1, memory_dims, nullptr), where(name));
    if (count <= 0) ACCELERATE_HDF5_CHECK(H5Sselect_none(memory_space.get()), where(name));
    (void)dims;
    const BlockingCallWatchdog watchdog("checkpoint: collective H5Dwrite of '" + where(name) + "'", options.timeout);
    ACCELERATE_HDF5_CHECK(H5Dwrite(dataset.get(), type, memory_space.get(), file_space.get(), transfer.get(), data),
                          where(name));
  }

  void tag(const Dataset& dataset, std::string_view name, c10::ScalarType type, std::string_view kind,
           std::uint32_t crc) {
    write_attribute(dataset.get(), "dtype", std::string(dtype_name(type)), where(name));
    write_attribute(dataset.get(), "kind", std::string(kind), where(name));
    write_u32_attribute(dataset.get(), "crc32c", crc, where(name));
  }
};

CheckpointWriter::CheckpointWriter(const WriterOptions& options, const CheckpointInfo& info)
    : impl_(std::make_unique<Impl>(options)) {
  Impl& s = *impl_;
  const BlockingCallWatchdog watched = s.watch("creating the file and its attributes", "");
  // Also the deadline barrier before H5Fcreate, which is collective inside
  // HDF5 and cannot time out: a rank that never comes is named here.
  require_same_on_all_ranks(s.comm, options.file.string(), "CheckpointWriter (file name)");
  s.spare = std::make_unique<SpareCore>(
      cores_of_this_rank(s.comm.ranks_on_this_host("CheckpointWriter (counting the ranks on each host)")));
  s.assigned_bytes.assign(static_cast<std::size_t>(s.size), 0);
  s.file = create_parallel_file(options.comm.get(), options.file, ParallelFileOptions{.alignment = options.alignment},
                                options.timeout);
  s.transfer = collective_transfer(options.two_phase_io);
  s.link_creation = PropertyList(H5Pcreate(H5P_LINK_CREATE), "link creation list");
  ACCELERATE_HDF5_CHECK(H5Pset_create_intermediate_group(s.link_creation.get(), 1), "link creation list");
  s.dataset_creation = PropertyList(H5Pcreate(H5P_DATASET_CREATE), "dataset creation list");
  // Contiguous layout, allocated at creation (parallel HDF5 requires early
  // allocation) and never pre-filled: every byte is written exactly once.
  ACCELERATE_HDF5_CHECK(H5Pset_layout(s.dataset_creation.get(), H5D_CONTIGUOUS), "dataset creation list");
  ACCELERATE_HDF5_CHECK(H5Pset_fill_time(s.dataset_creation.get(), H5D_FILL_TIME_NEVER), "dataset creation list");

  const hid_t root = s.file.get();
  const std::string where = options.file.string();
  write_attribute(root, "format", std::string(FORMAT_NAME), where);
  write_attribute(root, "format_version", std::int64_t{FORMAT_VERSION}, where);
  write_attribute(root, "library_version", std::string(config::version), where);
  write_attribute(root, "torch_version", accelerate::torch_version(), where);
  write_attribute(root, "hdf5_version", std::string(accelerate::detail::hdf5_runtime_version()), where);
  write_attribute(root, "world_size", std::int64_t{s.size}, where);
  write_attribute(root, "num_nodes", std::int64_t{options.num_nodes}, where);
  write_attribute(root, "node_index", std::int64_t{options.node_index}, where);
  write_attribute(root, "step", info.step, where);
  write_attribute(root, "iteration", info.iteration, where);
  write_attribute(root, "mixed_precision", info.mixed_precision, where);
  // Every rank must write identical metadata: rank 0's clock decides.
  std::string created = utc_now();
  s.comm.broadcast(created, 0, "CheckpointWriter: broadcast of the creation time from rank 0");
  write_attribute(root, "created", created, where);
}

CheckpointWriter::~CheckpointWriter() = default;

void CheckpointWriter::write_replicated(std::string_view name, const at::Tensor& tensor) {
  Impl& s = *impl_;
  const BlockingCallWatchdog watched = s.watch("write_replicated", name);
  validate_dataset_name(name, s.options.file);
  require_same_on_all_ranks(s.comm, describe("replicated", name, tensor), "write_replicated");
  require_values(tensor, name, s.options.file.string());  // the same on every rank, after the comparison
  const at::Tensor data = host_contiguous(tensor);
  const std::int64_t elements = data.numel();
  const std::size_t element_size = data.element_size();
  const std::uint64_t bytes = static_cast<std::uint64_t>(elements) * element_size;
  std::vector<hsize_t> dims(data.sizes().begin(), data.sizes().end());

  // Who writes what: large tensors in per-rank shares, small ones whole by
  // the rank with the fewest bytes so far (the same choice on every rank).
  Share share;
  if (bytes >= s.options.split_threshold && s.size > 1) {
    share = share_of(elements, element_size, s.rank, s.size);
  } else {
    const auto owner =
        static_cast<int>(std::min_element(s.assigned_bytes.begin(), s.assigned_bytes.end()) - s.assigned_bytes.begin());
    s.assigned_bytes[static_cast<std::size_t>(owner)] += bytes;
    if (owner == s.rank) share = Share{0, elements};
  }
  const auto* base =
      static_cast<const std::byte*>(data.data_ptr()) + share.begin * static_cast<std::int64_t>(element_size);
  const std::uint64_t share_bytes = static_cast<std::uint64_t>(share.count) * element_size;
  std::uint32_t local_crc = 0;
  SpareCore::Task checksum = s.spare->run([&] { local_crc = crc32c(base, share_bytes); }, share_bytes);

  Datatype type = hdf5_type_of(data.scalar_type(), s.where(name));
  Dataset dataset = s.create_dataset(name, type.get(), dims);
  if (elements > 0) {
    s.write_selection(
        dataset, type.get(), dims, base, share.count,
        [&](hid_t space) { select_flat_range(space, dims, share.begin, share.count); }, name);
  }
  checksum.wait();
  s.written += share_bytes;
  const std::uint32_t crc = combine_crc_in_rank_order(s.comm, local_crc, share_bytes);
  s.tag(dataset, name, data.scalar_type(), "replicated", crc);
  dataset.close(s.where(name));
  if (s.options.on_progress) s.options.on_progress(bytes);
}

void CheckpointWriter::write_pieces(std::string_view name, c10::ScalarType dtype, at::IntArrayRef shape,
                                    std::vector<TensorPiece> pieces) {
  Impl& s = *impl_;
  const BlockingCallWatchdog watched = s.watch("write_pieces", name);
  validate_dataset_name(name, s.options.file);
  require_same_on_all_ranks(s.comm, describe("pieces of", name, dtype, shape), "write_pieces");
  const std::int64_t total = c10::multiply_integers(shape);
  require_valid_pieces(s.comm, pieces, dtype, total, {}, "write_pieces", s.where(name));
  const std::size_t element_size = c10::elementSize(dtype);
  // This rank's pieces, in order, in one buffer: HDF5 fills the selected
  // elements of the file in ascending order from consecutive memory.
  std::vector<at::Tensor> parts;
  const auto ranges = flat_ranges(pieces);
  std::vector<PieceChecksum> checksums;
  for (const TensorPiece& piece : pieces) {
    if (piece.data.numel() == 0) continue;
    parts.push_back(host_contiguous(piece.data));
    checksums.push_back({piece.offset, piece.data.numel(),
                         crc32c(parts.back().data_ptr(), static_cast<std::size_t>(parts.back().nbytes()))});
  }
  // The checksums are combined before the write: combining is also where a
  // gap or overlap between the ranks' pieces is refused.
  const std::uint32_t crc = combine_piece_checksums(s.comm, checksums, total, element_size, s.where(name));
  const at::Tensor buffer = parts.empty() ? at::Tensor() : parts.size() == 1 ? parts.front() : at::cat(parts);
  const std::int64_t count = buffer.defined() ? buffer.numel() : 0;

  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Datatype type = hdf5_type_of(dtype, s.where(name));
  Dataset dataset = s.create_dataset(name, type.get(), dims);
  if (total > 0) {
    s.write_selection(
        dataset, type.get(), dims, count > 0 ? buffer.data_ptr() : static_cast<const void*>(&count), count,
        [&](hid_t space) { select_flat_ranges(space, dims, ranges); }, name);
  }
  s.written += static_cast<std::uint64_t>(count) * element_size;
  s.tag(dataset, name, dtype, "replicated", crc);
  dataset.close(s.where(name));
  if (s.options.on_progress) s.options.on_progress(static_cast<std::uint64_t>(total) * element_size);
}

void CheckpointWriter::write_per_rank(std::string_view name, const at::Tensor& tensor) {
  Impl& s = *impl_;
  const BlockingCallWatchdog watched = s.watch("write_per_rank", name);
  validate_dataset_name(name, s.options.file);
  require_same_on_all_ranks(s.comm, describe("per-rank", name, tensor), "write_per_rank");
  require_values(tensor, name, s.options.file.string());
  const at::Tensor data = host_contiguous(tensor);
  const std::int64_t elements = data.numel();
  const std::uint64_t row_bytes = static_cast<std::uint64_t>(elements) * data.element_size();
  std::vector<hsize_t> dims{static_cast<hsize_t>(s.size)};
  dims.insert(dims.end(), data.sizes().begin(), data.sizes().end());

  // The pointer is taken here: the worker touches nothing but the bytes.
  const void* const row = data.data_ptr();
  std::uint32_t row_crc = 0;
  SpareCore::Task checksum = s.spare->run([&] { row_crc = crc32c(row, row_bytes); }, row_bytes);
  Datatype type = hdf5_type_of(data.scalar_type(), s.where(name));
  Dataset dataset = s.create_dataset(name, type.get(), dims);
  if (elements > 0) {
    s.write_selection(
        dataset, type.get(), dims, row, elements, [&](hid_t space) { select_row(space, dims, s.rank); }, name);
  }
  checksum.wait();
  s.written += row_bytes;
  const std::vector<std::int64_t> row_crcs =
      all_gather(s.comm, row_crc, "write_per_rank (all-gather of the row checksums)");
  std::uint32_t crc = 0;
  for (const std::int64_t value : row_crcs) crc = crc32c_combine(crc, static_cast<std::uint32_t>(value), row_bytes);
  s.tag(dataset, name, data.scalar_type(), "per_rank", crc);
  write_attribute(dataset.get(), "row_crc32c", row_crcs, s.where(name));
  dataset.close(s.where(name));
  if (s.options.on_progress) s.options.on_progress(row_bytes);
}

void CheckpointWriter::write_per_rank_bytes(std::string_view name, std::span<const std::byte> bytes) {
  Impl& s = *impl_;
  const BlockingCallWatchdog watched = s.watch("write_per_rank_bytes", name);
  validate_dataset_name(name, s.options.file);
  require_same_on_all_ranks(s.comm, "per-rank bytes '" + std::string(name) + "'", "write_per_rank_bytes");
  const std::vector<std::int64_t> lengths =
      all_gather(s.comm, static_cast<std::int64_t>(bytes.size()), "write_per_rank_bytes (all-gather of the lengths)");
  const std::int64_t width = *std::max_element(lengths.begin(), lengths.end());
  // Padded copy of this rank's row: these blobs are small (RNG, loader states).
  std::vector<std::uint8_t> row(static_cast<std::size_t>(width), 0);
  std::memcpy(row.data(), bytes.data(), bytes.size());
  const std::uint32_t row_crc = crc32c(row.data(), row.size());
  std::vector<hsize_t> dims{static_cast<hsize_t>(s.size), static_cast<hsize_t>(width)};
  Datatype type = hdf5_type_of(c10::ScalarType::Byte, s.where(name));
  Dataset dataset = s.create_dataset(name, type.get(), dims);
  if (width > 0) {
    s.write_selection(
        dataset, type.get(), dims, row.data(), width, [&](hid_t space) { select_row(space, dims, s.rank); }, name);
  }
  s.written += row.size();
  const std::vector<std::int64_t> row_crcs =
      all_gather(s.comm, row_crc, "write_per_rank (all-gather of the row checksums)");
  std::uint32_t crc = 0;
  for (const std::int64_t value : row_crcs) {
    crc = crc32c_combine(crc, static_cast<std::uint32_t>(value), static_cast<std::uint64_t>(width));
  }
  s.tag(dataset, name, c10::ScalarType::Byte, "per_rank_bytes", crc);
  write_attribute(dataset.get(), "row_crc32c", row_crcs, s.where(name));
  write_attribute(dataset.get(), "lengths", lengths, s.where(name));
  dataset.close(s.where(name));
  if (s.options.on_progress) s.options.on_progress(bytes.size());
}

void CheckpointWriter::set_attribute(std::string_view group, std::string_view name, const AttributeValue& value) {
  Impl& s = *impl_;
  if (!group.empty()) validate_dataset_name(group, s.options.file);
  require_same_on_all_ranks(s.comm, "attribute '" + std::string(group) + "' '" + std::string(name) + "'",
                            "set_attribute");
  const std::string where = s.where(group);
  // Metadata reads are collective (H5Pset_all_coll_metadata_ops): watched.
  const BlockingCallWatchdog watchdog("checkpoint: writing attribute '" + std::string(name) + "' of '" + where + "'",
                                      s.options.timeout);
  if (group.empty()) {
    write_attribute(s.file.get(), name, value, where);
    return;
  }
  const std::string path(group);
  Group handle;
  if (H5Lexists(s.file.get(), path.c_str(), H5P_DEFAULT) > 0) {
    handle = Group(H5Gopen2(s.file.get(), path.c_str(), H5P_DEFAULT), where);
  } else {
    handle = Group(H5Gcreate2(s.file.get(), path.c_str(), s.link_creation.get(), H5P_DEFAULT, H5P_DEFAULT), where);
  }
  write_attribute(handle.get(), name, value, where);
}

void CheckpointWriter::close() {
  Impl& s = *impl_;
  if (s.closed) return;
  s.closed = true;
  {
    const BlockingCallWatchdog watchdog = s.watch("H5Fflush", "");
    ACCELERATE_HDF5_CHECK(H5Fflush(s.file.get(), H5F_SCOPE_GLOBAL), s.options.file.string());
  }
  close_parallel_file(s.file, s.options.comm.get(), s.options.timeout, s.options.file.string());
}

std::uint64_t CheckpointWriter::bytes_written_locally() const noexcept { return impl_->written; }
const std::filesystem::path& CheckpointWriter::file() const noexcept { return impl_->options.file; }
int CheckpointWriter::size() const noexcept { return impl_->size; }

}  // namespace accelerate::checkpoint
