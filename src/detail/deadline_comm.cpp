#include "detail/deadline_comm.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <numeric>

#include "accelerate/error.hpp"
#include "detail/arrival_board.hpp"
#include "detail/job_step.hpp"
#include "detail/fnv1a.hpp"
#include "detail/mpi_check.hpp"
#include "detail/mpi_wait.hpp"
#include "detail/unique_comm.hpp"

namespace accelerate::detail {

MPI_Op to_mpi(Reduce op) {
  switch (op) {
    case Reduce::Min: return MPI_MIN;
    case Reduce::Max: return MPI_MAX;
    case Reduce::Sum: return MPI_SUM;
  }
  return MPI_OP_NULL;
}

DeadlineComm::DeadlineComm(MPI_Comm comm, std::chrono::milliseconds timeout)
    : comm_(comm), timeout_(timeout), board_(ArrivalBoard::attached(comm)) {
  ACCELERATE_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  ACCELERATE_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

namespace {

// Buffers up to this size travel through a heap copy that is leaked when
// the wait times out: MPI may still write into it when a late rank
// arrives, long after the caller's own memory is gone. Larger transfers
// (checkpoint shares) use the caller's memory; after a TimeoutError the job
// must be aborted before it is reused.
constexpr std::size_t kStagedBytes = 64 * 1024;

std::size_t bytes_of(int count, MPI_Datatype type) {
  int size = 0;
  ACCELERATE_MPI_CHECK(MPI_Type_size(type, &size));
  return static_cast<std::size_t>(count) * static_cast<std::size_t>(size);
}

}  // namespace

template <class Buffers>
void DeadlineComm::complete_staged(MPI_Request& request, std::string_view what,
                                   std::unique_ptr<Buffers>& buffers) const {
  try {
    complete(request, what);
  } catch (const TimeoutError&) {
    (void)buffers.release();  // deliberately leaked: the request is still pending
    throw;
  }
}

void DeadlineComm::barrier(std::string_view what) const {
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Ibarrier(comm_, &request));
  complete(request, what);
}

void DeadlineComm::broadcast(void* buffer, int count, MPI_Datatype type, int root, std::string_view what) const {
  MPI_Request request = MPI_REQUEST_NULL;
  const std::size_t bytes = bytes_of(count, type);
  if (bytes > kStagedBytes) {
    ACCELERATE_MPI_CHECK(MPI_Ibcast(buffer, count, type, root, comm_, &request));
    complete(request, what);
    return;
  }
  auto staging = std::make_unique<std::byte[]>(bytes);
  if (rank_ == root && bytes > 0) std::memcpy(staging.get(), buffer, bytes);
  ACCELERATE_MPI_CHECK(MPI_Ibcast(staging.get(), static_cast<int>(bytes), MPI_BYTE, root, comm_, &request));
  complete_staged(request, what, staging);
  if (bytes > 0) std::memcpy(buffer, staging.get(), bytes);
}

void DeadlineComm::broadcast(std::string& text, int root, std::string_view what) const {
  long long length = static_cast<long long>(text.size());
  broadcast(&length, 1, MPI_LONG_LONG, root, what);
  text.resize(static_cast<std::size_t>(length));
  if (length > 0) broadcast(text.data(), static_cast<int>(length), MPI_CHAR, root, what);
}

void DeadlineComm::all_reduce(void* values, int count, MPI_Datatype type, MPI_Op op, std::string_view what) const {
  const std::size_t bytes = bytes_of(count, type);
  auto staging = std::make_unique<std::byte[]>(bytes);
  if (bytes > 0) std::memcpy(staging.get(), values, bytes);
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, staging.get(), count, type, op, comm_, &request));
  complete_staged(request, what, staging);
  if (bytes > 0) std::memcpy(values, staging.get(), bytes);
}

void DeadlineComm::all_gather(const void* mine, int count, MPI_Datatype type, void* all, std::string_view what) const {
  const std::size_t share = bytes_of(count, type);
  const std::size_t bytes = share * static_cast<std::size_t>(size_);
  auto staging = std::make_unique<std::byte[]>(bytes + share);  // everyone's, then mine
  if (share > 0) std::memcpy(staging.get() + bytes, mine, share);
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Iallgather(staging.get() + bytes, static_cast<int>(share), MPI_BYTE, staging.get(),
                                      static_cast<int>(share), MPI_BYTE, comm_, &request));
  complete_staged(request, what, staging);
  if (bytes > 0) std::memcpy(all, staging.get(), bytes);
}

void DeadlineComm::all_gather_v(const void* mine, int count, void* all, const int* counts, const int* displs,
                                MPI_Datatype type, std::string_view what) const {
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Iallgatherv(mine, count, type, all, counts, displs, type, comm_, &request));
  complete(request, what);
}

std::vector<std::vector<char>> DeadlineComm::all_gather_byte_strings(std::span<const char> mine,
                                                                     std::string_view what) const {
  return gather_byte_strings_to(mine, -1, what);
}

std::vector<std::vector<char>> DeadlineComm::gather_byte_strings(std::span<const char> mine, int root,
                                                                 std::string_view what) const {
  return gather_byte_strings_to(mine, root, what);
}

std::vector<std::vector<char>> DeadlineComm::gather_byte_strings_to(std::span<const char> mine, int root,
                                                                    std::string_view what) const {
  if (mine.size() > static_cast<std::size_t>(INT_MAX)) {
    throw ConfigError(std::string(what) + ": " + std::to_string(mine.size()) +
                      " bytes from this rank exceed the 2 GiB limit of one MPI message.");
  }
  const bool everyone = root < 0;
  const bool receives = everyone || rank_ == root;
  // Everything MPI reads or writes, the counts included, lives on the heap
  // and is leaked on a timeout (complete_staged): a late rank's arrival may
  // still reach it.
  struct Buffers {
    int length = 0;
    std::vector<int> lengths;
    std::vector<int> offsets;
    std::vector<char> mine;
    std::vector<char> all;
  };
  auto buffers = std::make_unique<Buffers>();
  Buffers& b = *buffers;
  b.length = static_cast<int>(mine.size());
  b.lengths.resize(static_cast<std::size_t>(size_));
  MPI_Request request = MPI_REQUEST_NULL;
  if (everyone) {
    ACCELERATE_MPI_CHECK(MPI_Iallgather(&b.length, 1, MPI_INT, b.lengths.data(), 1, MPI_INT, comm_, &request));
  } else {
    ACCELERATE_MPI_CHECK(MPI_Igather(&b.length, 1, MPI_INT, b.lengths.data(), 1, MPI_INT, root, comm_, &request));
  }
  complete_staged(request, std::string(what) + " (sizes)", buffers);
  b.offsets.assign(b.lengths.size(), 0);
  std::exclusive_scan(b.lengths.begin(), b.lengths.end(), b.offsets.begin(), 0);
  if (receives) b.all.resize(static_cast<std::size_t>(b.offsets.back()) + static_cast<std::size_t>(b.lengths.back()));
  b.mine.assign(mine.begin(), mine.end());
  if (everyone) {
    ACCELERATE_MPI_CHECK(MPI_Iallgatherv(b.mine.data(), b.length, MPI_BYTE, b.all.data(), b.lengths.data(),
                                         b.offsets.data(), MPI_BYTE, comm_, &request));
  } else {
    ACCELERATE_MPI_CHECK(MPI_Igatherv(b.mine.data(), b.length, MPI_BYTE, b.all.data(), b.lengths.data(),
                                      b.offsets.data(), MPI_BYTE, root, comm_, &request));
  }
  complete_staged(request, std::string(what) + " (payload)", buffers);
  std::vector<std::vector<char>> parts;
  if (!receives) return parts;
  for (std::size_t r = 0; r < b.lengths.size(); ++r) {
    const auto begin = b.all.begin() + b.offsets[r];
    parts.emplace_back(begin, begin + b.lengths[r]);
  }
  return parts;
}

void DeadlineComm::broadcast_spans(const std::vector<Span>& spans, int root, std::string_view what) const {
  if (spans.empty()) return;
  if (spans.size() == 1) {
    broadcast_bytes(spans.front().data, spans.front().bytes, root, what);
    return;
  }
  std::vector<int> lengths;
  std::vector<MPI_Aint> addresses;
  for (const Span& span : spans) {
    MPI_Aint address = 0;
    ACCELERATE_MPI_CHECK(MPI_Get_address(span.data, &address));
    lengths.push_back(span.bytes);
    addresses.push_back(address);
  }
  UniqueDatatype type;
  ACCELERATE_MPI_CHECK(MPI_Type_create_hindexed(static_cast<int>(lengths.size()), lengths.data(), addresses.data(),
                                                MPI_BYTE, type.out()));
  MPI_Datatype committed = type.get();
  ACCELERATE_MPI_CHECK(MPI_Type_commit(&committed));
  // MPI keeps a committed type alive until pending operations on it end, so
  // freeing it at scope exit is safe even after a timeout.
  MPI_Request request = MPI_REQUEST_NULL;
  ACCELERATE_MPI_CHECK(MPI_Ibcast(MPI_BOTTOM, 1, committed, root, comm_, &request));
  complete(request, what);
}

int DeadlineComm::ranks_on_this_host(std::string_view what) const {
  // Not MPI_Comm_split_type: it has no non-blocking form, so a rank that died
  // before it left the others blocked in it for good. A gathered hash of the
  // processor name runs under the deadline instead.
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  ACCELERATE_MPI_CHECK(MPI_Get_processor_name(name, &length));
  const std::uint64_t mine = fnv1a(std::string_view(name, static_cast<std::size_t>(length)));
  const std::vector<std::uint64_t> hosts = all_gather(mine, what);
  return static_cast<int>(std::count(hosts.begin(), hosts.end(), mine));
}

void DeadlineComm::complete(MPI_Request& request, std::string_view what) const {
  const std::int64_t sequence = board_ != nullptr ? board_->arrive() : 0;
  wait(request, sequence, what);
}

void DeadlineComm::wait(MPI_Request& request, std::int64_t sequence, std::string_view what) const {
  const auto tested_done = [&request] {
    int done = 0;
    ACCELERATE_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    return done != 0;
  };
  // A long wait may be another rank's timeout: answer its arrival query.
  const auto answer_queries = [this] {
    if (board_ != nullptr) board_->serve_queries();
  };
  if (poll_until(std::chrono::steady_clock::now() + timeout_, tested_done, answer_queries)) return;
  // The request stays pending (MPI cannot cancel a collective): never free
  // the communicator under it.
  abandon(comm_);
  report_timeout(sequence, what);
}

void DeadlineComm::report_timeout(std::int64_t sequence, std::string_view what) const {
  std::string missing;
  if (board_ == nullptr) {
    missing = "not known (this communicator carries no arrival board; State's communicators do)";
  } else {
    missing = board_->missing_ranks(sequence, std::chrono::seconds(2));
    if (missing.empty()) missing = "none found (all ranks entered it; one may have crashed inside)";
  }
  throw TimeoutError(std::string(what) + " did not complete within " + std::to_string(timeout_.count()) +
                     " ms (collective #" + std::to_string(sequence) + " on a communicator of " + std::to_string(size_) +
                     " ranks)" + at_training_step() + ". Ranks that never arrived: " + missing +
                     ". They crashed, hang, or took a different code path; their own output names the cause. "
                     "The communicator is unusable now: abort the job (accelerate::abort_all). Raise the "
                     "limit with InitProcessGroupKwargs::timeout or ACCELERATE_TIMEOUT if the work before "
                     "this step is legitimately slow.");
}

}  // namespace accelerate::detail
