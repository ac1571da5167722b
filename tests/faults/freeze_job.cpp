// One rank freezes itself (SIGSTOP) at a chosen moment of a job; every other
// rank must leave within the timeout plus a margin (freeze_test.sh times
// them). Each moment is one the library once left without a deadline:
//
//   start-up        the victim stops before MPI_Init: the others wait in
//                   MPI_Init (a fence over every rank)
//   exit            the victim stops before its State ends: the others wait
//                   in MPI_Finalize
//   after-timeout   the victim stops before a collective; the others' timeout
//                   error unwinds through State (which used to finalise) into
//                   a handler that returns instead of aborting
//   hdf5-barrier    the victim stops inside the first MPI_Barrier that HDF5
//                   makes while a checkpoint of 1000 small tensors is written
//                   (its metadata-cache sync point, here reached from
//                   H5Dcreate, or at the latest H5Fflush): the others wait
//                   inside HDF5, where no deadline of ours runs. The call
//                   chain is printed.
//
// usage: freeze_job <moment> <victim rank> <work dir>
// The victim's freeze moment goes to <work dir>/frozen_at (Unix ms).
#include <accelerate/accelerate.hpp>
#include <accelerate/runtime/mpi_comm.hpp>
#if ACCELERATE_HAVE_HDF5
#include <accelerate/checkpoint/checkpoint_writer.hpp>
#endif

#include <execinfo.h>
#include <mpi.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

namespace {

namespace fs = std::filesystem;

fs::path work_dir;
std::atomic<bool> freeze_in_barrier{false};

void freeze_now() {
  const auto now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  if (std::FILE* file = std::fopen((work_dir / "frozen_at").c_str(), "w")) {
    std::fprintf(file, "%lld\n", static_cast<long long>(now.count()));
    std::fclose(file);
  }
  std::fprintf(stderr, "freeze_job: stopping pid %d now\n", static_cast<int>(::getpid()));
  std::fflush(stderr);
  std::raise(SIGSTOP);
}

// The launcher's rank, before MPI can say (Open MPI, Hydra, Slurm).
int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return 0;
}

int run(const std::string& moment, int victim) {
  const bool is_victim = launcher_rank() == victim;
  if (moment == "start-up" && is_victim) freeze_now();
  accelerate::State state;
  if (moment == "after-timeout") {
    if (is_victim) freeze_now();
    state.wait_for_everyone("freeze_job: the barrier the frozen rank never reaches");
  }
#if ACCELERATE_HAVE_HDF5
  if (moment == "hdf5-barrier") {
    namespace ck = accelerate::checkpoint;
    ck::CheckpointWriter writer({.comm = state.world_comm(), .file = work_dir / "state.h5", .timeout = state.timeout()},
                                {});
    if (is_victim) freeze_in_barrier = true;
    for (int i = 0; i < 1000; ++i) {
      writer.write_replicated("tensor_" + std::to_string(i), torch::full({64}, static_cast<float>(i)));
    }
    writer.close();
    if (is_victim) freeze_now();  // HDF5 made no barrier: freeze here, so the test still ends
    state.wait_for_everyone("freeze_job: after the checkpoint");
  }
#endif
  if (moment == "exit" && is_victim) freeze_now();
  std::cout << "freeze_job: rank " << state.process_index() << " reached the end" << std::endl;
  return 0;
}

}  // namespace

// The victim stops inside HDF5's own barrier (this definition takes the
// place of the MPI library's for every caller; ENABLE_EXPORTS).
extern "C" int MPI_Barrier(MPI_Comm comm) {
  if (freeze_in_barrier.exchange(false)) {
    // Which HDF5 call reached the barrier, for the log.
    void* frames[12];
    const int depth = backtrace(frames, 12);
    backtrace_symbols_fd(frames, depth, STDERR_FILENO);
    freeze_now();
  }
  return PMPI_Barrier(comm);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: freeze_job start-up|exit|after-timeout|hdf5-barrier <victim rank> <work dir>\n";
    return 2;
  }
  work_dir = argv[3];
  try {
    return run(argv[1], std::atoi(argv[2]));
  } catch (const std::exception& error) {
    // A handler that returns instead of aborting the job: State is already
    // gone (it was destroyed by the exception) and must not have waited in
    // a collective exit for the frozen rank.
    std::cerr << "freeze_job: " << error.what() << std::endl;
    return 1;
  }
}
