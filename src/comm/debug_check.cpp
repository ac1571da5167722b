#include "comm/debug_check.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <sstream>
#include <vector>

#include "accelerate/error.hpp"
#include "detail/mpi_check.hpp"
#include "detail/mpi_wait.hpp"

namespace accelerate::detail {
namespace {

constexpr int kMaxDims = 8;

// Fixed-size, trivially copyable, so it travels as bytes.
struct Signature {
  std::array<char, 32> operation{};
  int32_t root = 0;
  int32_t dtype = -1;
  int32_t device = -1;
  int32_t ndim = -1;  // -1: no tensor
  std::array<int64_t, kMaxDims> sizes{};
};

Signature describe(std::string_view operation, const at::Tensor* tensor, int root) {
  Signature s;
  std::memcpy(s.operation.data(), operation.data(), std::min(operation.size(), s.operation.size() - 1));
  s.root = root;
  if (tensor != nullptr && tensor->defined()) {
    s.dtype = static_cast<int32_t>(tensor->scalar_type());
    s.device = static_cast<int32_t>(tensor->device().type());
    s.ndim = static_cast<int32_t>(tensor->dim());
    for (int d = 0; d < std::min<int>(s.ndim, kMaxDims); ++d) s.sizes[static_cast<std::size_t>(d)] = tensor->size(d);
  }
  return s;
}

std::string render(const Signature& s) {
  std::ostringstream out;
  out << s.operation.data();
  if (s.ndim >= 0) {
    out << ' ' << c10::toString(static_cast<c10::ScalarType>(s.dtype)) << " [";
    for (int d = 0; d < std::min<int>(s.ndim, kMaxDims); ++d)
      out << (d ? ", " : "") << s.sizes[static_cast<std::size_t>(d)];
    if (s.ndim > kMaxDims) out << ", …";
    out << "] on " << c10::DeviceTypeName(static_cast<c10::DeviceType>(s.device), true);
  }
  out << " (root " << s.root << ")";
  return out.str();
}

bool agree(const Signature& a, const Signature& b, ShapeRule rule) {
  if (std::strcmp(a.operation.data(), b.operation.data()) != 0 || a.root != b.root) return false;
  if (rule == ShapeRule::Ignore) return true;
  if (a.dtype != b.dtype || a.device != b.device || a.ndim != b.ndim) return false;
  const int first = rule == ShapeRule::Trailing ? 1 : 0;
  for (int d = first; d < std::min<int>(a.ndim, kMaxDims); ++d) {
    if (a.sizes[static_cast<std::size_t>(d)] != b.sizes[static_cast<std::size_t>(d)]) return false;
  }
  return true;
}

}  // namespace

void verify_collective(MPI_Comm control, std::string_view group, std::string_view operation, const at::Tensor* tensor,
                       int root, ShapeRule rule, std::chrono::milliseconds timeout) {
  int size = 0;
  ACCELERATE_MPI_CHECK(MPI_Comm_size(control, &size));
  const Signature mine = describe(operation, tensor, root);
  std::vector<Signature> all(static_cast<std::size_t>(size));
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(
      MPI_Iallgather(&mine, sizeof(Signature), MPI_BYTE, all.data(), sizeof(Signature), MPI_BYTE, control, &request));
  wait_with_timeout(request, timeout, "debug-mode check before " + std::string(operation), control);
  const bool consistent =
      std::all_of(all.begin(), all.end(), [&](const Signature& other) { return agree(all.front(), other, rule); });
  if (consistent) return;
  std::string message = "Cannot apply " + std::string(operation) + " on group '" + std::string(group) +
                        "': the processes disagree on what to do (ACCELERATE_DEBUG_MODE check).";
  for (int r = 0; r < size; ++r)
    message += "\n  - Process " + std::to_string(r) + ": " + render(all[static_cast<std::size_t>(r)]);
  message += rule == ShapeRule::Trailing ? "\nAll dimensions but the first, the dtype and the device must match."
                                         : "\nShapes, dtypes and devices must match on every process.";
  throw CollectiveMismatch(message);
}

}  // namespace accelerate::detail
