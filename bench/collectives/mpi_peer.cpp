// Raw MPI: the reference our ProcessGroup is held to.
//
// "mpi" is the blocking collective an MPI programmer would write
// (MPI_Allreduce in place, MPI_Bcast, MPI_Allgather). Two diagnostics split
// any gap between it and our API into its causes:
//
//   mpi.nonblocking          MPI_I<collective> + MPI_Wait: the algorithm our
//                            backend uses (Open MPI's libnbc instead of the
//                            blocking "tuned" component), waited for in MPI.
//   mpi.nonblocking.backoff  MPI_I<collective> completed by a copy of the
//                            polling loop of MpiWork::wait (MPI_Test + clock
//                            per poll, yielding after 4096 polls): the cost
//                            of polling in our code instead of MPI_Wait.
//   mpi.barrier+blocking     (all_reduce) MPI_Ibarrier + MPI_Wait, then the
//                            blocking MPI_Allreduce: the price of checking
//                            arrival under a deadline before a blocking call.
#include <chrono>
#include <thread>

#include "peer.hpp"

namespace bench {
namespace {

// The completion loop of MpiWork::wait (src/comm/mpi/mpi_work.cpp with
// detail::PollBackoff, as read when this benchmark was written): MPI_Test
// and a clock read per poll; after 4096 polls a yield per poll, after a
// second a 1 ms sleep per poll. The deadline and query service are left out.
void wait_with_backoff(MPI_Request& request) {
  const auto started = std::chrono::steady_clock::now();
  int flag = 0;
  for (unsigned polls = 1;; ++polls) {
    MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
    if (flag != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (polls < 4096) continue;
    if (now - started < std::chrono::seconds(1)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

class MpiPeer final : public Peer {
 public:
  explicit MpiPeer(MPI_Comm comm) {
    MPI_Comm_dup(comm, &comm_);
    // A duplicate inherits State's MPI_ERRORS_RETURN; a benchmark should stop loudly.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_ARE_FATAL);
  }
  ~MpiPeer() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0) MPI_Comm_free(&comm_);
  }
  MpiPeer(const MpiPeer&) = delete;
  MpiPeer& operator=(const MpiPeer&) = delete;

  [[nodiscard]] std::string name() const override { return "mpi"; }

  [[nodiscard]] std::string describe() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string text(version, static_cast<std::size_t>(length));
    if (const auto end = text.find_first_of(",\n"); end != std::string::npos) text.resize(end);
    return "raw MPI on a duplicate of the world communicator: " + text;
  }

  std::vector<Candidate> candidates(Collective op, Buffers& buffers) override {
    MPI_Comm comm = comm_;
    switch (op) {
      case Collective::AllReduce: {
        auto post = [comm, &buffers](MPI_Request& request) {
          MPI_Iallreduce(MPI_IN_PLACE, buffers.data.data_ptr(), static_cast<int>(buffers.count), MPI_FLOAT, MPI_SUM,
                         comm, &request);
        };
        auto all = with_diagnostics({"mpi", "MPI_Allreduce(MPI_IN_PLACE, float, sum)", false,
                                     [comm, &buffers] {
                                       MPI_Allreduce(MPI_IN_PLACE, buffers.data.data_ptr(),
                                                     static_cast<int>(buffers.count), MPI_FLOAT, MPI_SUM, comm);
                                     }},
                                    "MPI_Iallreduce", post);
        all.push_back({"mpi.barrier+blocking", "MPI_Ibarrier + MPI_Wait, then MPI_Allreduce", true, [comm, &buffers] {
                         MPI_Request request = MPI_REQUEST_NULL;
                         MPI_Ibarrier(comm, &request);
                         MPI_Wait(&request, MPI_STATUS_IGNORE);
                         MPI_Allreduce(MPI_IN_PLACE, buffers.data.data_ptr(), static_cast<int>(buffers.count),
                                       MPI_FLOAT, MPI_SUM, comm);
                       }});
        return all;
      }
      case Collective::Broadcast: {
        auto post = [comm, &buffers](MPI_Request& request) {
          MPI_Ibcast(buffers.data.data_ptr(), static_cast<int>(buffers.count), MPI_FLOAT, 0, comm, &request);
        };
        return with_diagnostics({"mpi", "MPI_Bcast(float, root 0)", false,
                                 [comm, &buffers] {
                                   MPI_Bcast(buffers.data.data_ptr(), static_cast<int>(buffers.count), MPI_FLOAT, 0,
                                             comm);
                                 }},
                                "MPI_Ibcast", post);
      }
      case Collective::AllGather: {
        auto post = [comm, &buffers](MPI_Request& request) {
          MPI_Iallgather(buffers.input.data_ptr(), static_cast<int>(buffers.count), MPI_FLOAT,
                         buffers.output.data_ptr(), static_cast<int>(buffers.count), MPI_FLOAT, comm, &request);
        };
        return with_diagnostics({"mpi", "MPI_Allgather(float)", false,
                                 [comm, &buffers] {
                                   MPI_Allgather(buffers.input.data_ptr(), static_cast<int>(buffers.count), MPI_FLOAT,
                                                 buffers.output.data_ptr(), static_cast<int>(buffers.count), MPI_FLOAT,
                                                 comm);
                                 }},
                                "MPI_Iallgather", post);
      }
    }
    return {};
  }

 private:
  template <typename Post>
  static std::vector<Candidate> with_diagnostics(Candidate blocking, const std::string& call, Post post) {
    std::vector<Candidate> all;
    all.push_back(std::move(blocking));
    all.push_back({"mpi.nonblocking", call + " + MPI_Wait", true, [post] {
                     MPI_Request request = MPI_REQUEST_NULL;
                     post(request);
                     MPI_Wait(&request, MPI_STATUS_IGNORE);
                   }});
    all.push_back({"mpi.nonblocking.backoff", call + " + MpiWork::wait's polling loop (copy)", true, [post] {
                     MPI_Request request = MPI_REQUEST_NULL;
                     post(request);
                     wait_with_backoff(request);
                   }});
    return all;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace

std::unique_ptr<Peer> make_mpi_peer(MPI_Comm comm) { return std::make_unique<MpiPeer>(comm); }

}  // namespace bench
