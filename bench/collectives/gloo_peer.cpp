// LibTorch's own c10d::ProcessGroupGloo: what a LibTorch program gets
// without Accelerate-HPC. Compiled only when the Gloo headers and the c10d
// symbols are present (see CMakeLists.txt); gloo_peer_unavailable.cpp
// stands in otherwise.
//
// Bootstrap: c10d needs a Store. Rank 0 makes a fresh directory, its path
// travels to the other ranks over MPI, and every rank opens a FileStore
// there (so several ranks on one host, or hosts sharing TMPDIR). Transport:
// Gloo TCP on the loopback address when all ranks share a host, else on the
// interface named by GLOO_SOCKET_IFNAME, else on the host name's address.
// Worker threads: c10d's default (2), as a LibTorch user gets them.
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <gloo/config.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "peer.hpp"

namespace bench {
namespace {

bool all_on_one_host(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_size = 0;
  int size = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_size(comm, &size);
  MPI_Comm_free(&node);
  int everywhere = node_size == size ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &everywhere, 1, MPI_INT, MPI_MIN, comm);
  return everywhere != 0;
}

// Rank 0 creates the directory; every rank returns its path.
std::string shared_directory(MPI_Comm comm, int rank) {
  char path[PATH_MAX] = {};
  if (rank == 0) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/accelerate-bench-gloo-XXXXXX";
    if (pattern.size() >= sizeof(path) || mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("gloo peer: cannot create a FileStore directory from " + pattern);
    }
    pattern.copy(path, pattern.size());
  }
  MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, comm);
  return path;
}

class GlooPeer final : public Peer {
 public:
  explicit GlooPeer(MPI_Comm comm) {
    MPI_Comm_dup(comm, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    directory_ = shared_directory(comm_, rank_);
    store_ = c10::make_intrusive<c10d::FileStore>(directory_ + "/store", size_);

    auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::minutes(5));
    const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
    if (interface != nullptr && *interface != '\0') {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
      transport_ = std::string("TCP on interface ") + interface;
    } else if (all_on_one_host(comm_)) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      transport_ = "TCP on 127.0.0.1 (loopback)";
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      transport_ = "TCP on the host name's address";
    }
    threads_ = options->threads;
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, rank_, size_, options);
  }

  ~GlooPeer() override {
    group_.reset();  // joins Gloo's worker threads, closes its sockets
    store_.reset();
    MPI_Barrier(comm_);
    if (rank_ == 0) {
      std::error_code ignored;
      std::filesystem::remove_all(directory_, ignored);
    }
    MPI_Comm_free(&comm_);
  }
  GlooPeer(const GlooPeer&) = delete;
  GlooPeer& operator=(const GlooPeer&) = delete;

  [[nodiscard]] std::string name() const override { return "gloo"; }

  [[nodiscard]] std::string describe() const override {
    return "LibTorch c10d::ProcessGroupGloo (Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
           std::to_string(GLOO_VERSION_MINOR) + "." + std::to_string(GLOO_VERSION_PATCH) + " headers), " + transport_ +
           ", " + std::to_string(threads_) + " worker threads, FileStore bootstrap";
  }

  std::vector<Candidate> candidates(Collective op, Buffers& buffers) override {
    c10d::ProcessGroupGloo* group = group_.get();
    switch (op) {
      case Collective::AllReduce: {
        std::vector<at::Tensor> tensors{buffers.data};
        return {{"gloo", "ProcessGroupGloo::allreduce({t})->wait()", false,
                 [group, tensors]() mutable { group->allreduce(tensors)->wait(); }}};
      }
      case Collective::Broadcast: {
        std::vector<at::Tensor> tensors{buffers.data};
        return {{"gloo", "ProcessGroupGloo::broadcast({t}, root 0)->wait()", false,
                 [group, tensors]() mutable { group->broadcast(tensors)->wait(); }}};
      }
      case Collective::AllGather: {
        // c10d's list form, the outputs being views of the same flat buffer
        // the other implementations write (1.13's _allgather_base is not
        // implemented for Gloo).
        std::vector<std::vector<at::Tensor>> outputs(1);
        for (int r = 0; r < size_; ++r)
          outputs[0].push_back(buffers.output.narrow(0, r * buffers.count, buffers.count));
        std::vector<at::Tensor> inputs{buffers.input};
        return {{"gloo", "ProcessGroupGloo::allgather({{out_0..out_n-1}}, {in})->wait()", false,
                 [group, outputs, inputs]() mutable { group->allgather(outputs, inputs)->wait(); }}};
      }
    }
    return {};
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int threads_ = 0;
  std::string directory_;
  std::string transport_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
};

}  // namespace

std::unique_ptr<Peer> make_gloo_peer(MPI_Comm comm, std::string& why_not) {
  why_not.clear();
  return std::make_unique<GlooPeer>(comm);
}

}  // namespace bench
