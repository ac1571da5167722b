// Indexing a checkpoint file: every dataset's kind, shape, dtype and
// checksums, checked against what the file really stores (see entry_index.hpp).
#include "checkpoint/entry_index.hpp"

#include <bit>
#include <exception>
#include <limits>

#include "accelerate/error.hpp"
#include "checkpoint/attributes.hpp"
#include "checkpoint/hdf5_types.hpp"
#include "detail/hdf5_check.hpp"

namespace accelerate::checkpoint::detail {
namespace {

// Whether `dataset` (a replicated entry of `info`) can be read as raw bytes,
// and from where.
void locate_raw_bytes(hid_t dataset, IndexedEntry& entry, const std::string& where) {
  if constexpr (std::endian::native != std::endian::little) return;  // the file is little endian
  c10::ScalarType type;
  try {
    type = dtype_from_name(entry.info.spec.dtype, where);
  } catch (const ConfigError&) {
    return;  // reported when the entry is read
  }
  PropertyList creation(H5Dget_create_plist(dataset), where);
  if (H5Pget_layout(creation.get()) != H5D_CONTIGUOUS || H5Pget_nfilters(creation.get()) != 0) return;
  Datatype stored(H5Dget_type(dataset), where);
  Datatype memory = hdf5_type_of(type, where);
  if (H5Tequal(stored.get(), memory.get()) <= 0) return;
  std::uint64_t bytes = c10::elementSize(type);
  for (const std::int64_t size : entry.info.spec.shape) bytes *= static_cast<std::uint64_t>(size);
  if (bytes == 0) {
    entry.direct = true;
    return;
  }
  const haddr_t offset = H5Dget_offset(dataset);
  if (offset == HADDR_UNDEF || H5Dget_storage_size(dataset) != bytes) return;
  entry.direct = true;
  entry.offset = static_cast<std::uint64_t>(offset);
}

[[noreturn]] void damaged(const std::string& where, const std::string& what) {
  throw Hdf5Error("checkpoint: '" + where + "' is damaged: " + what +
                  ". Restore the checkpoint from a copy, or resume from an earlier one.");
}

// Checks what the reads of `entry` will rely on, so that a damaged file
// fails here, naming the dataset, rather than in an allocation or a lookup:
// the kind, dimensions that fit 64 bits, a declared size that a contiguous
// dataset really stores, and one checksum (and length) per row.
void check_entry(hid_t dataset, const IndexedEntry& entry, const std::vector<hsize_t>& dims, const std::string& where) {
  std::size_t element = 1;  // an unknown dtype is reported when the entry is read
  try {
    element = c10::elementSize(dtype_from_name(entry.info.spec.dtype, where));
  } catch (const ConfigError&) {
  }
  std::uint64_t bytes = element;
  for (const hsize_t size : dims) {
    if (size > static_cast<hsize_t>(std::numeric_limits<std::int64_t>::max()) ||
        __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(size), &bytes) ||
        bytes > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      damaged(where, "its dimensions declare more than 2^63 bytes");
    }
  }
  PropertyList creation(H5Dget_create_plist(dataset), where);
  if (H5Pget_layout(creation.get()) == H5D_CONTIGUOUS && bytes != 0) {
    Datatype stored(H5Dget_type(dataset), where);
    const std::uint64_t stored_bytes = H5Dget_storage_size(dataset);
    const std::size_t stored_element = H5Tget_size(stored.get());
    if (stored_element == 0 || stored_bytes / stored_element != bytes / element) {
      damaged(where, "its dimensions declare " + std::to_string(bytes / element) + " elements, but the file stores " +
                         std::to_string(stored_element == 0 ? 0 : stored_bytes / stored_element));
    }
  }
  if (entry.info.kind == EntryKind::Replicated) return;
  const auto rows = static_cast<std::size_t>(entry.info.rows);
  if (entry.row_crcs.size() != rows) {
    damaged(where, "it has " + std::to_string(rows) + " rows but " + std::to_string(entry.row_crcs.size()) +
                       " checksums (attribute 'row_crc32c')");
  }
  if (entry.info.kind != EntryKind::PerRankBytes) return;
  const std::int64_t width = entry.info.spec.shape.empty() ? 0 : entry.info.spec.shape.front();
  if (entry.lengths.size() != rows) {
    damaged(where, "it has " + std::to_string(rows) + " rows but " + std::to_string(entry.lengths.size()) +
                       " lengths (attribute 'lengths')");
  }
  for (const std::int64_t length : entry.lengths) {
    if (length < 0 || length > width) {
      damaged(where, "a row length of " + std::to_string(length) + " bytes lies outside its rows of " +
                         std::to_string(width) + " bytes (attribute 'lengths')");
    }
  }
}

struct VisitContext {
  std::map<std::string, IndexedEntry>* entries;
  std::string file;
  std::string error;
  std::exception_ptr damage;  // an Hdf5Error that already names the dataset, rethrown as it is
};

#if H5_VERSION_GE(1, 12, 0)
using LinkInfo = H5L_info2_t;
#else
using LinkInfo = H5L_info_t;
#endif

// Visits links rather than objects: an object visit reads every object's
// full header information first, which costs more than the indexing itself.
herr_t index_link(hid_t root, const char* name, const LinkInfo* info, void* data) {
  auto& context = *static_cast<VisitContext*>(data);
  if (info->type != H5L_TYPE_HARD) return 0;
  try {
    const std::string where = context.file + ":/" + name;
    const hid_t object = H5Oopen(root, name, H5P_DEFAULT);
    if (object < 0) throw Hdf5Error("checkpoint: cannot open '" + where + "'");
    if (H5Iget_type(object) != H5I_DATASET) {
      H5Oclose(object);
      return 0;
    }
    Dataset dataset(object, where);
    Dataspace space(H5Dget_space(dataset.get()), where);
    const int rank = ACCELERATE_HDF5_CHECK(H5Sget_simple_extent_ndims(space.get()), where);
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    ACCELERATE_HDF5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), where);
    IndexedEntry entry;
    entry.info.spec.name = name;
    entry.info.spec.dtype = attribute_or<std::string>(read_attribute(dataset.get(), "dtype", where), "");
    const std::string kind = attribute_or<std::string>(read_attribute(dataset.get(), "kind", where), "");
    entry.info.crc32c =
        static_cast<std::uint32_t>(attribute_or<std::int64_t>(read_attribute(dataset.get(), "crc32c", where), 0));
    if (entry.info.spec.dtype.empty() || kind.empty()) {
      context.error = "dataset '/" + std::string(name) + "' lacks the 'dtype' or 'kind' attribute";
      return -1;
    }
    std::vector<std::int64_t> shape(dims.begin(), dims.end());
    // Every kind by name: an unknown one (a newer writer, or damage) must
    // never be read as some other layout.
    if (kind == "replicated") {
      entry.info.kind = EntryKind::Replicated;
    } else if (kind == "per_rank" || kind == "per_rank_bytes") {
      entry.info.kind = kind == "per_rank" ? EntryKind::PerRank : EntryKind::PerRankBytes;
      entry.info.rows = shape.empty() ? 0 : shape.front();
      if (!shape.empty()) shape.erase(shape.begin());
      entry.row_crcs = attribute_or<std::vector<std::int64_t>>(read_attribute(dataset.get(), "row_crc32c", where), {});
      if (entry.info.kind == EntryKind::PerRankBytes) {
        entry.lengths = attribute_or<std::vector<std::int64_t>>(read_attribute(dataset.get(), "lengths", where), {});
      }
    } else {
      context.error = "dataset '/" + std::string(name) + "' has the unknown kind '" + kind +
                      "' (known: replicated, per_rank, per_rank_bytes). The file was written by a newer "
                      "Accelerate-HPC or is damaged; read it with the version that wrote it";
      return -1;
    }
    entry.info.spec.shape = std::move(shape);
    check_entry(dataset.get(), entry, dims, where);
    if (entry.info.kind == EntryKind::Replicated) locate_raw_bytes(dataset.get(), entry, where);
    (*context.entries)[name] = std::move(entry);
  } catch (const Hdf5Error&) {
    context.damage = std::current_exception();
    return -1;
  } catch (const std::exception& error) {
    context.error = error.what();
    return -1;
  }
  return 0;
}

}  // namespace

std::map<std::string, IndexedEntry> index_entries(hid_t root, const std::string& where) {
  std::map<std::string, IndexedEntry> entries;
  VisitContext context{&entries, where, {}, nullptr};
  const herr_t status = H5Lvisit(root, H5_INDEX_NAME, H5_ITER_INC, index_link, &context);
  if (context.damage) std::rethrow_exception(context.damage);
  if (status < 0) {
    throw Hdf5Error("checkpoint: cannot index '" + where +
                    "': " + (context.error.empty() ? "H5Lvisit failed" : context.error));
  }
  return entries;
}

}  // namespace accelerate::checkpoint::detail
