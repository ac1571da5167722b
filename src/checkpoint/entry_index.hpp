// The index of a checkpoint file's entries, built once when a reader opens
// it: each dataset's kind, shape, dtype and checksums, and whether it can be
// read as raw bytes. A damaged file fails here, naming the dataset, rather
// than later in an allocation or a lookup.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "accelerate/checkpoint/checkpoint_reader.hpp"

namespace accelerate::checkpoint::detail {

struct IndexedEntry {
  EntryInfo info;
  std::vector<std::int64_t> row_crcs;
  std::vector<std::int64_t> lengths;  // per-rank bytes
  // Replicated entries whose file bytes are exactly their memory bytes
  // (contiguous, unfiltered, stored type == memory type) are read by
  // read_direct() from `offset`; the others through HDF5.
  bool direct = false;
  std::uint64_t offset = 0;
};

/// Every dataset reachable from `root` (the file named `where` in messages),
/// by path. Throws Hdf5Error for a damaged entry or an unknown kind.
std::map<std::string, IndexedEntry> index_entries(hid_t root, const std::string& where);

}  // namespace accelerate::checkpoint::detail
