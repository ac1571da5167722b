// Rules shared by the writer and the reader: how a dataset's flattened
// elements are split into per-rank shares, and how such a flat range is
// selected in an N-dimensional HDF5 dataspace.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace accelerate::checkpoint::detail {

struct Share {
  std::int64_t begin = 0;  // first element (row-major flattening)
  std::int64_t count = 0;
};

/// Share of `rank` among `size` ranks for `elements` elements of
/// `element_size` bytes: shares are contiguous, in rank order, and their
/// boundaries fall on multiples of 1 MiB of data (the last rank takes the rest).
Share share_of(std::int64_t elements, std::size_t element_size, int rank, int size);

/// Selects elements [begin, begin + count) of the row-major flattening of
/// `dims` in `space` (a union of at most 2·rank boxes). count == 0 selects none.
void select_flat_range(hid_t space, const std::vector<hsize_t>& dims, std::int64_t begin, std::int64_t count);
/// The union of several flat ranges [begin, begin + count), each as above;
/// HDF5 visits the selected elements in ascending order. None selects nothing.
void select_flat_ranges(hid_t space, const std::vector<hsize_t>& dims,
                        const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges);

/// Selects row `row` (all of the trailing dimensions) of a [rows, ...] space.
void select_row(hid_t space, const std::vector<hsize_t>& dims, std::int64_t row);

}  // namespace accelerate::checkpoint::detail
