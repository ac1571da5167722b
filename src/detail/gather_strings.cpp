#include "detail/gather_strings.hpp"

#include <numeric>

#include "detail/mpi_check.hpp"
#include "detail/mpi_wait.hpp"

namespace accelerate::detail {

std::vector<std::string> gather_strings(const std::string& mine, int root, MPI_Comm comm,
                                        std::chrono::milliseconds timeout) {
  int rank = 0;
  int size = 0;
  ACCELERATE_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ACCELERATE_MPI_CHECK(MPI_Comm_size(comm, &size));
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(rank == root ? size : 0);
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, comm, &request));
  wait_with_timeout(request, timeout, "gather_strings (sizes)", comm);

  std::vector<int> offsets(lengths.size(), 0);
  if (!lengths.empty()) std::exclusive_scan(lengths.begin(), lengths.end(), offsets.begin(), 0);
  std::string buffer(rank == root ? static_cast<std::size_t>(offsets.back() + lengths.back()) : 0, '\0');
  ACCELERATE_MPI_CHECK(MPI_Igatherv(mine.data(), length, MPI_CHAR, buffer.data(), lengths.data(), offsets.data(),
                                    MPI_CHAR, root, comm, &request));
  wait_with_timeout(request, timeout, "gather_strings (payload)", comm);

  std::vector<std::string> result;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    result.push_back(buffer.substr(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(lengths[i])));
  }
  return result;
}

}  // namespace accelerate::detail
