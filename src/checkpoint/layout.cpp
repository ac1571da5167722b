#include "checkpoint/layout.hpp"

#include <algorithm>

#include "checkpoint/hdf5_handle.hpp"

namespace accelerate::checkpoint::detail {
namespace {

constexpr std::int64_t kShareGranule = std::int64_t{1} << 20;  // bytes

struct Box {
  std::vector<hsize_t> start;
  std::vector<hsize_t> count;
};

// Boxes covering [begin, end) of the flattening of dims[d..], with the leading
// coordinates fixed to `prefix`.
void decompose(const std::vector<hsize_t>& dims, std::size_t d, std::vector<hsize_t>& prefix, std::int64_t begin,
               std::int64_t end, std::vector<Box>& out) {
  if (begin >= end) return;
  const std::size_t rank = dims.size();
  auto box_for_rows = [&](std::int64_t first, std::int64_t last) {  // rows [first, last) of dim d, trailing full
    Box box;
    box.start = prefix;
    box.count.assign(prefix.size(), 1);
    box.start.push_back(static_cast<hsize_t>(first));
    box.count.push_back(static_cast<hsize_t>(last - first));
    for (std::size_t k = d + 1; k < rank; ++k) {
      box.start.push_back(0);
      box.count.push_back(dims[k]);
    }
    out.push_back(std::move(box));
  };
  std::int64_t inner = 1;
  for (std::size_t k = d + 1; k < rank; ++k) inner *= static_cast<std::int64_t>(dims[k]);
  if (d + 1 == rank || inner == 0) {
    box_for_rows(begin, end);
    return;
  }
  const std::int64_t first_row = begin / inner;
  const std::int64_t last_row = (end - 1) / inner;
  auto partial_row = [&](std::int64_t row, std::int64_t from, std::int64_t to) {
    prefix.push_back(static_cast<hsize_t>(row));
    decompose(dims, d + 1, prefix, from, to, out);
    prefix.pop_back();
  };
  if (first_row == last_row) {
    if (end - begin == inner) {
      box_for_rows(first_row, first_row + 1);
    } else {
      partial_row(first_row, begin - first_row * inner, end - first_row * inner);
    }
    return;
  }
  std::int64_t full_begin = first_row;
  if (begin % inner != 0) {
    partial_row(first_row, begin % inner, inner);
    full_begin = first_row + 1;
  }
  std::int64_t full_end = last_row + 1;
  if (end % inner != 0) full_end = last_row;
  if (full_begin < full_end) box_for_rows(full_begin, full_end);
  if (end % inner != 0) partial_row(last_row, 0, end % inner);
}

}  // namespace

Share share_of(std::int64_t elements, std::size_t element_size, int rank, int size) {
  const std::int64_t granule = std::max<std::int64_t>(1, kShareGranule / static_cast<std::int64_t>(element_size));
  const std::int64_t granules = (elements + granule - 1) / granule;
  const std::int64_t first = granules * rank / size;
  const std::int64_t last = granules * (rank + 1) / size;
  const std::int64_t begin = std::min(elements, first * granule);
  const std::int64_t end = std::min(elements, last * granule);
  return Share{begin, end - begin};
}

void select_flat_range(hid_t space, const std::vector<hsize_t>& dims, std::int64_t begin, std::int64_t count) {
  select_flat_ranges(space, dims, {{begin, count}});
}

void select_flat_ranges(hid_t space, const std::vector<hsize_t>& dims,
                        const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges) {
  std::vector<Box> boxes;
  bool whole_scalar = false;
  for (const auto& [begin, count] : ranges) {
    if (count <= 0) continue;
    if (dims.empty()) {  // scalar dataspace: one element
      whole_scalar = true;
      continue;
    }
    std::vector<hsize_t> prefix;
    decompose(dims, 0, prefix, begin, begin + count, boxes);
  }
  if (whole_scalar) {
    ACCELERATE_HDF5_CHECK(H5Sselect_all(space), "dataspace selection");
    return;
  }
  if (boxes.empty()) {
    ACCELERATE_HDF5_CHECK(H5Sselect_none(space), "dataspace selection");
    return;
  }
  bool first = true;
  for (const Box& box : boxes) {
    ACCELERATE_HDF5_CHECK(H5Sselect_hyperslab(space, first ? H5S_SELECT_SET : H5S_SELECT_OR, box.start.data(), nullptr,
                                              box.count.data(), nullptr),
                          "dataspace selection");
    first = false;
  }
}

void select_row(hid_t space, const std::vector<hsize_t>& dims, std::int64_t row) {
  std::vector<hsize_t> start(dims.size(), 0);
  std::vector<hsize_t> count = dims;
  start[0] = static_cast<hsize_t>(row);
  count[0] = 1;
  ACCELERATE_HDF5_CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                        "dataspace selection");
}

}  // namespace accelerate::checkpoint::detail
