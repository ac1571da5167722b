#include "checkpoint/collective.hpp"

#include <functional>
#include <vector>

#include "accelerate/error.hpp"
#include "checkpoint/crc32c.hpp"
#include "detail/mpi_check.hpp"

namespace accelerate::checkpoint::detail {

void require_same_on_all_ranks(MPI_Comm comm, std::string_view description, std::string_view call) {
  const std::uint64_t hash = std::hash<std::string_view>{}(description);
  // One all-reduce of (h, ~h) under MAX gives max(h) and ~min(h) on every
  // rank: all hashes agree exactly when those two are equal, and every rank
  // reaches the same verdict.
  std::uint64_t extremes[2] = {hash, ~hash};
  ACCELERATE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_UINT64_T, MPI_MAX, comm));
  if (extremes[0] == ~extremes[1]) return;

  int size = 0;
  ACCELERATE_MPI_CHECK(MPI_Comm_size(comm, &size));
  const int length = static_cast<int>(description.size());
  std::vector<int> lengths(static_cast<std::size_t>(size));
  ACCELERATE_MPI_CHECK(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  std::vector<int> offsets(static_cast<std::size_t>(size), 0);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[static_cast<std::size_t>(r)] = total;
    total += lengths[static_cast<std::size_t>(r)];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  ACCELERATE_MPI_CHECK(MPI_Allgatherv(description.data(), length, MPI_CHAR, all.data(), lengths.data(),
                                      offsets.data(), MPI_CHAR, comm));
  std::string message = accelerate::detail::where() + " checkpoint: ranks called " + std::string(call) +
                        " with different arguments; every rank must save the same entries in the same order:";
  for (int r = 0; r < size; ++r) {
    message += "\n  rank " + std::to_string(r) + ": " +
               all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                          static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)]));
  }
  throw CollectiveMismatch(message);
}

bool all_ranks_agree(MPI_Comm comm, bool ok) {
  int value = ok ? 1 : 0;
  ACCELERATE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MIN, comm));
  return value == 1;
}

std::uint32_t combine_crc_in_rank_order(MPI_Comm comm, std::uint32_t crc, std::uint64_t length) {
  int size = 0;
  ACCELERATE_MPI_CHECK(MPI_Comm_size(comm, &size));
  const std::uint64_t local[2] = {crc, length};
  std::vector<std::uint64_t> all(2 * static_cast<std::size_t>(size));
  ACCELERATE_MPI_CHECK(MPI_Allgather(local, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, comm));
  std::uint32_t combined = 0;
  for (int r = 0; r < size; ++r) {
    combined = crc32c_combine(combined, static_cast<std::uint32_t>(all[2 * static_cast<std::size_t>(r)]),
                              all[2 * static_cast<std::size_t>(r) + 1]);
  }
  return combined;
}

std::vector<std::int64_t> all_gather(MPI_Comm comm, std::int64_t value) {
  int size = 0;
  ACCELERATE_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<std::int64_t> all(static_cast<std::size_t>(size));
  ACCELERATE_MPI_CHECK(MPI_Allgather(&value, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, comm));
  return all;
}

}  // namespace accelerate::checkpoint::detail
