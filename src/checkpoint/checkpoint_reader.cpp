#include "accelerate/checkpoint/checkpoint_reader.hpp"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <set>

#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "checkpoint/attributes.hpp"
#include "checkpoint/collective.hpp"
#include "checkpoint/direct_read.hpp"
#include "checkpoint/entry_index.hpp"
#include "checkpoint/hdf5_turn.hpp"
#include "checkpoint/hdf5_types.hpp"
#include "checkpoint/layout.hpp"
#include "checkpoint/parallel_file.hpp"
#include "checkpoint/spare_core.hpp"
#include "checkpoint/tensor_pieces.hpp"
#include "detail/blocking_call_watchdog.hpp"
#include "detail/crc32c.hpp"
#include "detail/mpi_check.hpp"

namespace accelerate::checkpoint {
using accelerate::detail::crc32c;

using namespace accelerate::checkpoint::detail;
using accelerate::detail::BlockingCallWatchdog;

namespace {

std::string hex(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

// How read_direct() batches are read on this host: the spread (Auto
// resolves to PageCache when every rank of the communicator shares one
// host, and so one page cache; every rank reaches the same answer) and the
// threads of this rank (the cores it may run on, as many as its share of
// the host's cores when the ranks are not bound, at most kMaxReadThreads).
struct ReadPlan {
  Spread spread = Spread::Broadcast;
  int threads = 1;
};

constexpr int kMaxReadThreads = 8;

// Runs right after the reader's agreed open, so every rank is here.
ReadPlan plan_reads(const ReaderOptions& options, const DeadlineComm& comm) {
  const int host_size = comm.ranks_on_this_host("CheckpointReader (counting the ranks on each host)");
  const int size = comm.size();
  ReadPlan plan;
  switch (options.spread) {
    case ShareSpread::PageCache: plan.spread = Spread::PageCache; break;
    case ShareSpread::Broadcast: plan.spread = Spread::Broadcast; break;
    case ShareSpread::Auto: plan.spread = host_size == size ? Spread::PageCache : Spread::Broadcast; break;
  }
  if (options.read_threads > 0) {
    plan.threads = options.read_threads;
  } else {
    plan.threads = std::min(cores_of_this_rank(host_size), kMaxReadThreads);
  }
  return plan;
}

// A file descriptor open for reading, closed on destruction.
class ReadOnlyDescriptor {
 public:
  ReadOnlyDescriptor() = default;
  explicit ReadOnlyDescriptor(const std::filesystem::path& file) : fd_(::open(file.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~ReadOnlyDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  ReadOnlyDescriptor(const ReadOnlyDescriptor&) = delete;
  ReadOnlyDescriptor& operator=(const ReadOnlyDescriptor&) = delete;
  ReadOnlyDescriptor& operator=(ReadOnlyDescriptor&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  [[nodiscard]] int get() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace

struct CheckpointReader::Impl {
  explicit Impl(const ReaderOptions& o)
      : options(o), comm(o.comm.get(), o.timeout), rank(comm.rank()), size(comm.size()) {}
  ~Impl() { close_parallel_file_quietly(file, options.comm.get(), options.timeout, options.file.string()); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Hdf5Turn turn;  // first: HDF5 is ours from before the file opens until after it closes
  ReaderOptions options;
  DeadlineComm comm;  // every step the reader takes outside HDF5
  int rank = 0;
  int size = 1;
  File file;
  ReadOnlyDescriptor raw;  // read_direct()'s view of `file`
  ReadPlan plan;
  PropertyList transfer;
  CheckpointHeader header;
  std::map<std::string, IndexedEntry> entries;

  std::string where(std::string_view name) const { return options.file.string() + ":/" + std::string(name); }

  // Metadata reads are collective (H5Pset_all_coll_metadata_ops), and so are
  // opening and closing datasets: each public step runs whole under the
  // watchdog with the job's timeout (its own deadline waits end it first).
  [[nodiscard]] BlockingCallWatchdog watch(std::string_view step, std::string_view name) const {
    return BlockingCallWatchdog("checkpoint: " + std::string(step) + " of '" + where(name) + "'", options.timeout);
  }

  const IndexedEntry& find(std::string_view name) const {
    const auto it = entries.find(std::string(name));
    if (it == entries.end()) {
      throw ConfigError("checkpoint: '" + options.file.string() + "' has no entry '" + std::string(name) +
                        "'. List its entries with 'h5ls -r " + options.file.string() + "'.");
    }
    return it->second;
  }

  [[noreturn]] void corrupted(std::string_view name, std::uint32_t stored, std::uint32_t computed,
                              std::string_view detail) const {
    throw Hdf5Error("checkpoint: file '" + options.file.string() + "', dataset '/" + std::string(name) +
                    "' is corrupted" + std::string(detail) + ": CRC-32C of the data is " + hex(computed) +
                    ", the checkpoint recorded " + hex(stored) +
                    ". Load an older checkpoint (the newest complete one is found by latest_checkpoint()).");
  }

  // Reads elements [begin, begin + count) of the flattened dataset into `out`.
  void read_range(std::string_view name, hid_t type, std::int64_t begin, std::int64_t count, void* out,
                  const std::function<void(hid_t)>& select) {
    const std::string path(name);
    const BlockingCallWatchdog watchdog("checkpoint: collective H5Dread of '" + where(name) + "'", options.timeout);
    Dataset dataset(H5Dopen2(file.get(), path.c_str(), H5P_DEFAULT), where(name));
    Dataspace file_space(H5Dget_space(dataset.get()), where(name));
    select(file_space.get());
    const hsize_t memory_dims[1] = {static_cast<hsize_t>(count > 0 ? count : 1)};
    Dataspace memory_space(H5Screate_simple(1, memory_dims, nullptr), where(name));
    if (count <= 0) ACCELERATE_HDF5_CHECK(H5Sselect_none(memory_space.get()), where(name));
    (void)begin;
    ACCELERATE_HDF5_CHECK(H5Dread(dataset.get(), type, memory_space.get(), file_space.get(), transfer.get(), out),
                          where(name));
  }

  // Throws ConfigError unless `name` is a replicated entry of the dtype and shape of `destination`.
  const IndexedEntry& check_destination(const std::string& name, const at::Tensor& destination) const {
    const IndexedEntry& entry = find(name);
    const EntryInfo& info = entry.info;
    if (info.kind != EntryKind::Replicated) {
      throw ConfigError("checkpoint: '" + where(name) + "' is a per-rank entry; read it with read_per_rank().");
    }
    const std::string dtype(dtype_name(destination.scalar_type()));
    const std::vector<std::int64_t> shape(destination.sizes().begin(), destination.sizes().end());
    if (dtype != info.spec.dtype || shape != info.spec.shape) {
      throw ConfigError("checkpoint: '" + where(name) + "' holds " + info.spec.dtype + " " +
                        shape_to_string(info.spec.shape) + " but the destination is " + dtype + " " +
                        shape_to_string(shape) + ".");
    }
    return entry;
  }

  // Reads replicated entries into their destinations on every rank; `call`
  // names the public function for a collective-mismatch error. Collective.
  // Batches of about options.batch_bytes, in order, so that progress is
  // reported as the load goes; every rank cuts at the same places, since each
  // destination's size must equal its entry's (read_one_batch checks).
  void read_batch(const std::vector<std::pair<std::string, at::Tensor>>& reads, std::string_view call) {
    const BlockingCallWatchdog watched = watch(call, reads.empty() ? std::string_view() : reads.front().first);
    std::vector<std::pair<std::string, at::Tensor>> batch;
    std::uint64_t batch_bytes = 0;
    const auto flush = [&] {
      read_one_batch(batch, call);
      if (options.on_progress) options.on_progress(batch_bytes);
      batch.clear();
      batch_bytes = 0;
    };
    for (const auto& read : reads) {
      const auto bytes = static_cast<std::uint64_t>(read.second.numel()) * read.second.element_size();
      if (!batch.empty() && batch_bytes + bytes > options.batch_bytes) flush();
      batch.push_back(read);
      batch_bytes += bytes;
    }
    if (!batch.empty() || reads.empty()) flush();
  }

  // One batch: entries stored as raw bytes go through read_direct() together
  // (one checksum exchange and one broadcast per rank for the batch); any
  // others through HDF5, one by one.
  void read_one_batch(const std::vector<std::pair<std::string, at::Tensor>>& reads, std::string_view call) {
    std::string description = "read";
    std::vector<const IndexedEntry*> found;
    for (const auto& [name, destination] : reads) {
      found.push_back(&check_destination(name, destination));
      description += " '" + name + "'";
    }
    require_same_on_all_ranks(comm, description, call);
    // Plain CPU memory is read into directly; anything else through a CPU copy.
    std::vector<at::Tensor> targets;
    std::vector<DirectRead> direct;
    std::vector<std::size_t> direct_index;
    for (std::size_t i = 0; i < reads.size(); ++i) {
      const at::Tensor& destination = reads[i].second;
      const bool in_place = destination.device().is_cpu() && destination.is_contiguous();
      targets.push_back(in_place ? destination
                                 : at::empty(destination.sizes(), destination.options().device(at::kCPU)));
      if (!found[i]->direct) continue;
      direct.push_back(DirectRead{found[i]->offset, static_cast<std::uint64_t>(targets[i].nbytes()),
                                  static_cast<std::byte*>(targets[i].data_ptr()), found[i]->info.crc32c});
      direct_index.push_back(i);
    }
    if (!direct.empty()) {
      const auto failure = read_direct({.comm = &comm,
                                        .fd = raw.get(),
                                        .threads = plan.threads,
                                        .split_threshold = options.split_threshold,
                                        .verify_checksums = options.verify_checksums,
                                        .spread = plan.spread},
                                       direct);
      if (failure) {
        const std::size_t i = direct_index[failure->item];
        if (!failure->read_error.empty()) {
          throw Hdf5Error("checkpoint: file '" + options.file.string() + "', dataset '/" + reads[i].first +
                          "' cannot be read: " + failure->read_error +
                          ". Load an older checkpoint (the newest complete one is found by latest_checkpoint()).");
        }
        corrupted(reads[i].first, found[i]->info.crc32c, failure->computed_crc, "");
      }
    }
    for (std::size_t i = 0; i < reads.size(); ++i) {
      if (!found[i]->direct) read_through_hdf5(reads[i].first, found[i]->info, targets[i]);
      if (!targets[i].is_same(reads[i].second)) reads[i].second.copy_(targets[i]);
    }
  }

  // The general path (any layout or stored type HDF5 can convert): small
  // datasets read whole by every rank, large ones in shares that are
  // checksummed, combined and all-gathered. `target` is contiguous CPU memory.
  void read_through_hdf5(const std::string& name, const EntryInfo& info, const at::Tensor& target) {
    Impl& s = *this;
    const std::int64_t elements = target.numel();
    const std::size_t element_size = target.element_size();
    const std::uint64_t bytes = static_cast<std::uint64_t>(elements) * element_size;
    Datatype type = hdf5_type_of(target.scalar_type(), s.where(name));
    std::vector<hsize_t> dims(info.spec.shape.begin(), info.spec.shape.end());
    auto* base = static_cast<std::byte*>(target.data_ptr());

    if (bytes < s.options.split_threshold || s.size == 1) {
      if (elements > 0) {
        s.read_range(name, type.get(), 0, elements, base,
                     [&](hid_t space) { select_flat_range(space, dims, 0, elements); });
      }
      if (s.options.verify_checksums) {
        const std::uint32_t computed = crc32c(base, bytes);
        if (computed != info.crc32c) s.corrupted(name, info.crc32c, computed, "");
      }
    } else {
      const Share share = share_of(elements, element_size, s.rank, s.size);
      std::byte* mine = base + share.begin * static_cast<std::int64_t>(element_size);
      const std::uint64_t share_bytes = static_cast<std::uint64_t>(share.count) * element_size;
      s.read_range(name, type.get(), share.begin, share.count, mine,
                   [&](hid_t space) { select_flat_range(space, dims, share.begin, share.count); });
      if (s.options.verify_checksums) {
        const std::uint32_t computed = combine_crc_in_rank_order(s.comm, crc32c(mine, share_bytes), share_bytes);
        if (computed != info.crc32c) s.corrupted(name, info.crc32c, computed, "");
      }
      // Every rank gets the shares the others read.
      std::vector<std::int64_t> offsets(static_cast<std::size_t>(s.size) + 1, 0);
      for (int r = 0; r < s.size; ++r) {
        const Share other = share_of(elements, element_size, r, s.size);
        offsets[static_cast<std::size_t>(r)] = other.begin * static_cast<std::int64_t>(element_size);
      }
      offsets.back() = static_cast<std::int64_t>(bytes);
      if (bytes <= static_cast<std::uint64_t>(INT_MAX)) {
        std::vector<int> counts(static_cast<std::size_t>(s.size));
        std::vector<int> displs(static_cast<std::size_t>(s.size));
        for (int r = 0; r < s.size; ++r) {
          displs[static_cast<std::size_t>(r)] = static_cast<int>(offsets[static_cast<std::size_t>(r)]);
          counts[static_cast<std::size_t>(r)] =
              static_cast<int>(offsets[static_cast<std::size_t>(r) + 1] - offsets[static_cast<std::size_t>(r)]);
        }
        s.comm.all_gather_bytes_in_place(base, counts.data(), displs.data(),
                                         "checkpoint read of '" + name + "' (all-gather of the shares)");
      } else {
        constexpr std::int64_t kPiece = std::int64_t{1} << 30;
        for (int r = 0; r < s.size; ++r) {
          for (std::int64_t at = offsets[static_cast<std::size_t>(r)]; at < offsets[static_cast<std::size_t>(r) + 1];
               at += kPiece) {
            const std::int64_t length = std::min(kPiece, offsets[static_cast<std::size_t>(r) + 1] - at);
            s.comm.broadcast_bytes(base + at, static_cast<int>(length), r,
                                   "checkpoint read of '" + name + "' (broadcast of rank " + std::to_string(r) +
                                       "'s share)");
          }
        }
      }
    }
  }
};

CheckpointReader::CheckpointReader(const ReaderOptions& options) : impl_(std::make_unique<Impl>(options)) {
  Impl& s = *impl_;
  const BlockingCallWatchdog watched = s.watch("opening the file and reading its index", "");
  std::error_code ignored;
  // Also the deadline barrier before H5Fopen, which is collective inside
  // HDF5 and cannot time out: a rank that never comes is named here.
  if (!all_ranks_agree(s.comm, std::filesystem::is_regular_file(options.file, ignored),
                       "CheckpointReader (does the file exist on every rank?)")) {
    throw Hdf5Error("checkpoint: '" + options.file.string() +
                    "' does not exist on every rank. With save_on_each_node=false the checkpoint directory must "
                    "be on a file system all ranks share.");
  }
  s.file = open_parallel_file(options.comm.get(), options.file, options.timeout);
  s.raw = ReadOnlyDescriptor(options.file);
  const int open_error = s.raw.get() >= 0 ? 0 : errno;
  if (!all_ranks_agree(s.comm, s.raw.get() >= 0, "CheckpointReader (could every rank open the file?)")) {
    throw Hdf5Error("checkpoint: '" + options.file.string() + "' cannot be opened for reading on every rank (" +
                    (open_error == 0 ? std::string("see the other ranks' errors") : std::strerror(open_error)) +
                    "). Check its permissions.");
  }
  s.plan = plan_reads(options, s.comm);
  s.transfer = collective_transfer(false);
  const hid_t root = s.file.get();
  const std::string where = options.file.string();
  // Metadata reads are collective (H5Pset_all_coll_metadata_ops): watched.
  const BlockingCallWatchdog watchdog("checkpoint: reading the header and index of '" + where + "'", options.timeout);
  CheckpointHeader& h = s.header;
  h.format = attribute_or<std::string>(read_attribute(root, "format", where), "");
  if (h.format != FORMAT_NAME) {
    throw Hdf5Error("checkpoint: '" + where + "' is an HDF5 file but not an " + std::string(FORMAT_NAME) +
                    " checkpoint (root attribute 'format' is '" + h.format + "').");
  }
  h.format_version = attribute_or<std::int64_t>(read_attribute(root, "format_version", where), 0);
  if (h.format_version > FORMAT_VERSION || h.format_version < 1) {
    throw ConfigError("checkpoint: '" + where + "' has format version " + std::to_string(h.format_version) +
                      "; this library reads versions 1 to " + std::to_string(FORMAT_VERSION) +
                      ". Use the Accelerate-HPC version that wrote it or newer.");
  }
  h.library_version = attribute_or<std::string>(read_attribute(root, "library_version", where), "");
  h.torch_version = attribute_or<std::string>(read_attribute(root, "torch_version", where), "");
  h.world_size = attribute_or<std::int64_t>(read_attribute(root, "world_size", where), 0);
  h.num_nodes = attribute_or<std::int64_t>(read_attribute(root, "num_nodes", where), 0);
  h.node_index = attribute_or<std::int64_t>(read_attribute(root, "node_index", where), 0);
  h.step = attribute_or<std::int64_t>(read_attribute(root, "step", where), 0);
  h.iteration = attribute_or<std::int64_t>(read_attribute(root, "iteration", where), 0);
  h.mixed_precision = attribute_or<std::string>(read_attribute(root, "mixed_precision", where), "");
  h.created = attribute_or<std::string>(read_attribute(root, "created", where), "");

  s.entries = index_entries(root, where);
}

CheckpointReader::~CheckpointReader() = default;

const CheckpointHeader& CheckpointReader::header() const noexcept { return impl_->header; }
const std::filesystem::path& CheckpointReader::file() const noexcept { return impl_->options.file; }
int CheckpointReader::read_threads() const noexcept { return impl_->plan.threads; }
int CheckpointReader::size() const noexcept { return impl_->size; }

std::vector<EntryInfo> CheckpointReader::entries(std::string_view group) const {
  std::vector<EntryInfo> result;
  const std::string prefix = group.empty() ? std::string() : std::string(group) + "/";
  for (const auto& [name, entry] : impl_->entries) {
    if (name.compare(0, prefix.size(), prefix) == 0) result.push_back(entry.info);
  }
  return result;
}

bool CheckpointReader::contains(std::string_view name) const { return impl_->entries.count(std::string(name)) > 0; }

const EntryInfo& CheckpointReader::entry(std::string_view name) const { return impl_->find(name).info; }

int CheckpointReader::per_rank_source_row() const {
  const auto saved = static_cast<int>(std::max<std::int64_t>(1, impl_->header.world_size));
  return impl_->rank < saved ? impl_->rank : impl_->rank % saved;
}

at::Tensor CheckpointReader::read_replicated(std::string_view name) {
  return read_replicated(std::vector<std::string>{std::string(name)}).front();
}

std::vector<at::Tensor> CheckpointReader::read_replicated(const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, at::Tensor>> reads;
  for (const std::string& name : names) {
    const EntryInfo& info = impl_->find(name).info;
    reads.emplace_back(name, at::empty(info.spec.shape, at::TensorOptions().dtype(
                                                            dtype_from_name(info.spec.dtype, impl_->where(name)))));
  }
  impl_->read_batch(reads, "read_replicated");
  std::vector<at::Tensor> result;
  for (auto& [name, tensor] : reads) result.push_back(std::move(tensor));
  return result;
}

void CheckpointReader::read_replicated_into(std::string_view name, const at::Tensor& destination) {
  impl_->read_batch({{std::string(name), destination}}, "read_replicated");
}

void CheckpointReader::read_pieces(std::string_view name, std::vector<TensorPiece> pieces, int copy) {
  Impl& s = *impl_;
  const BlockingCallWatchdog watched = s.watch("read_pieces", name);
  const IndexedEntry& entry = s.find(name);
  require_same_on_all_ranks(s.comm, "read pieces of '" + std::string(name) + "'", "read_pieces");
  const EntryInfo& info = entry.info;
  const c10::ScalarType dtype = dtype_from_name(info.spec.dtype, s.where(name));
  std::int64_t total = 1;
  for (const std::int64_t d : info.spec.shape) total *= d;
  require_valid_pieces(s.comm, pieces, dtype, total,
                       info.kind == EntryKind::Replicated ? std::string()
                                                          : "it is a per-rank entry; read it with read_per_rank()",
                       "read_pieces", s.where(name));
  const auto ranges = flat_ranges(pieces);
  std::int64_t count = 0;
  for (const auto& range : ranges) count += range.second;
  // One read of this rank's selection into one buffer, in ascending order.
  const at::Tensor buffer = at::empty({count}, at::TensorOptions().dtype(dtype));
  if (total > 0) {
    std::vector<hsize_t> dims(info.spec.shape.begin(), info.spec.shape.end());
    Datatype type = hdf5_type_of(dtype, s.where(name));
    std::int64_t unused = 0;  // HDF5 wants a buffer even for an empty selection
    s.read_range(name, type.get(), 0, count, count > 0 ? buffer.data_ptr() : &unused,
                 [&](hid_t space) { select_flat_ranges(space, dims, ranges); });
  }
  std::vector<PieceChecksum> checksums;
  std::int64_t at = 0;
  const auto element_size = static_cast<std::int64_t>(buffer.element_size());
  for (const auto& [offset, length] : ranges) {
    checksums.push_back({offset, length,
                         crc32c(static_cast<const std::byte*>(buffer.data_ptr()) + at * element_size,
                                static_cast<std::size_t>(length * element_size)),
                         copy});
    at += length;
  }
  // Every rank gets every copy's checksum, so all agree on a corruption.
  for (const std::uint32_t computed :
       combine_copy_checksums(s.comm, checksums, total, static_cast<std::size_t>(element_size), s.where(name))) {
    if (s.options.verify_checksums && computed != info.crc32c) s.corrupted(name, info.crc32c, computed, "");
  }
  at = 0;
  for (const TensorPiece& piece : pieces) {
    const std::int64_t length = piece.data.numel();
    if (length == 0) continue;
    piece.data.copy_(buffer.narrow(0, at, length));
    at += length;
  }
  if (s.options.on_progress) s.options.on_progress(static_cast<std::uint64_t>(count * element_size));
}

at::Tensor CheckpointReader::read_per_rank(std::string_view name, int row) {
  Impl& s = *impl_;
  const BlockingCallWatchdog watched = s.watch("read_per_rank", name);
  const IndexedEntry& entry = s.find(name);
  if (entry.info.kind != EntryKind::PerRank) {
    throw ConfigError("checkpoint: '" + s.where(name) + "' is not a per-rank tensor entry.");
  }
  if (row < 0) row = per_rank_source_row();
  if (row >= entry.info.rows) {
    throw ConfigError("checkpoint: row " + std::to_string(row) + " of '" + s.where(name) + "' requested; it has " +
                      std::to_string(entry.info.rows) + " rows.");
  }
  require_same_on_all_ranks(s.comm, "read per-rank '" + std::string(name) + "'", "read_per_rank");
  at::Tensor result = at::empty(entry.info.spec.shape,
                                at::TensorOptions().dtype(dtype_from_name(entry.info.spec.dtype, s.where(name))));
  std::vector<hsize_t> dims{static_cast<hsize_t>(entry.info.rows)};
  dims.insert(dims.end(), entry.info.spec.shape.begin(), entry.info.spec.shape.end());
  Datatype type = hdf5_type_of(result.scalar_type(), s.where(name));
  const std::int64_t elements = result.numel();
  if (elements > 0) {
    s.read_range(name, type.get(), 0, elements, result.data_ptr(), [&](hid_t space) { select_row(space, dims, row); });
  }
  const auto computed = crc32c(result.data_ptr(), static_cast<std::size_t>(elements) * result.element_size());
  const auto stored = static_cast<std::uint32_t>(entry.row_crcs.at(static_cast<std::size_t>(row)));
  const bool ok = !s.options.verify_checksums || computed == stored;
  if (!all_ranks_agree(s.comm, ok, "read_per_rank (did every rank read its row?)")) {
    if (!ok) s.corrupted(name, stored, computed, " (row " + std::to_string(row) + ")");
    throw Hdf5Error("checkpoint: file '" + s.options.file.string() + "', dataset '/" + std::string(name) +
                    "' is corrupted in a row another rank read (see that rank's error).");
  }
  if (s.options.on_progress) s.options.on_progress(static_cast<std::uint64_t>(result.nbytes()));
  return result;
}

std::vector<std::byte> CheckpointReader::read_per_rank_bytes(std::string_view name, int row) {
  Impl& s = *impl_;
  const BlockingCallWatchdog watched = s.watch("read_per_rank_bytes", name);
  const IndexedEntry& entry = s.find(name);
  if (entry.info.kind != EntryKind::PerRankBytes) {
    throw ConfigError("checkpoint: '" + s.where(name) + "' is not a per-rank bytes entry.");
  }
  if (row < 0) row = per_rank_source_row();
  if (row >= entry.info.rows) {
    throw ConfigError("checkpoint: row " + std::to_string(row) + " of '" + s.where(name) + "' requested; it has " +
                      std::to_string(entry.info.rows) + " rows.");
  }
  require_same_on_all_ranks(s.comm, "read per-rank bytes '" + std::string(name) + "'", "read_per_rank_bytes");
  const std::int64_t width = entry.info.spec.shape.empty() ? 0 : entry.info.spec.shape.front();
  std::vector<std::byte> row_bytes(static_cast<std::size_t>(width));
  const std::vector<hsize_t> dims{static_cast<hsize_t>(entry.info.rows), static_cast<hsize_t>(width)};
  Datatype type = hdf5_type_of(c10::ScalarType::Byte, s.where(name));
  if (width > 0) {
    s.read_range(name, type.get(), 0, width, row_bytes.data(), [&](hid_t space) { select_row(space, dims, row); });
  }
  const auto computed = crc32c(row_bytes.data(), row_bytes.size());
  const auto stored = static_cast<std::uint32_t>(entry.row_crcs.at(static_cast<std::size_t>(row)));
  const bool ok = !s.options.verify_checksums || computed == stored;
  if (!all_ranks_agree(s.comm, ok, "read_per_rank_bytes (did every rank read its row?)")) {
    if (!ok) s.corrupted(name, stored, computed, " (row " + std::to_string(row) + ")");
    throw Hdf5Error("checkpoint: file '" + s.options.file.string() + "', dataset '/" + std::string(name) +
                    "' is corrupted in a row another rank read (see that rank's error).");
  }
  if (s.options.on_progress) s.options.on_progress(static_cast<std::uint64_t>(width));
  row_bytes.resize(static_cast<std::size_t>(entry.lengths.at(static_cast<std::size_t>(row))));
  return row_bytes;
}

std::optional<AttributeValue> CheckpointReader::attribute(std::string_view group, std::string_view name) {
  Impl& s = *impl_;
  // Metadata reads are collective (H5Pset_all_coll_metadata_ops): watched.
  const BlockingCallWatchdog watchdog("checkpoint: reading attribute '" + std::string(name) + "' of '" +
                                          s.where(group) + "'",
                                      s.options.timeout);
  if (group.empty()) return read_attribute(s.file.get(), name, s.options.file.string());
  const std::string path(group);
  if (H5Lexists(s.file.get(), path.c_str(), H5P_DEFAULT) <= 0) return std::nullopt;
  Object object(H5Oopen(s.file.get(), path.c_str(), H5P_DEFAULT), s.where(group));
  return read_attribute(object.get(), name, s.where(group));
}

KeyReport CheckpointReader::check_keys(std::string_view group, const std::vector<TensorSpec>& expected, bool strict) {
  const std::string prefix = group.empty() ? std::string() : std::string(group) + "/";
  std::vector<TensorSpec> found;
  for (const EntryInfo& info : entries(group)) {
    if (info.kind != EntryKind::Replicated) continue;
    TensorSpec spec = info.spec;
    spec.name = spec.name.substr(prefix.size());
    found.push_back(std::move(spec));
  }
  KeyReport report = compare_keys(expected, found);
  if (strict && !report.empty()) {
    throw ConfigError("checkpoint: '" + impl_->options.file.string() + "' group '" + std::string(group) +
                      "' does not match the destination (strict loading):\n" + report.to_string() +
                      "Load with strict=false to load the matching entries only.");
  }
  return report;
}

KeyReport CheckpointReader::load_into(std::string_view group, const std::map<std::string, at::Tensor>& destinations,
                                      bool strict) {
  Impl& s = *impl_;
  const std::string prefix = group.empty() ? std::string() : std::string(group) + "/";
  std::vector<TensorSpec> expected;
  for (const auto& [name, tensor] : destinations) {
    expected.push_back(TensorSpec{name, std::string(dtype_name(tensor.scalar_type())),
                                  std::vector<std::int64_t>(tensor.sizes().begin(), tensor.sizes().end())});
  }
  const KeyReport report = check_keys(group, expected, strict);
  std::set<std::string> skip(report.missing.begin(), report.missing.end());
  for (const KeyMismatch& mismatch : report.mismatched) skip.insert(mismatch.name);
  std::vector<std::pair<std::string, at::Tensor>> reads;
  for (const auto& [name, tensor] : destinations) {
    if (skip.count(name) == 0) reads.emplace_back(prefix + name, tensor);
  }
  s.read_batch(reads, "load_into");
  return report;
}

}  // namespace accelerate::checkpoint
