#include "accelerate/training_state/async_state_saver.hpp"

#include <mpi.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <torch/utils.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <thread>
#include <utility>

#include "accelerate/error.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/state.hpp"
#include "checkpoint/collective.hpp"
#include "checkpoint/hdf5_turn.hpp"
#include "detail/arrival_board.hpp"
#include "detail/deadline_comm.hpp"
#include "detail/mpi_check.hpp"
#include "detail/profile_range.hpp"
#include "detail/unique_comm.hpp"
#include "training_state/state_save.hpp"
#include "training_state/state_snapshot.hpp"

namespace accelerate::checkpoint {
namespace fs = std::filesystem;

namespace {

// Test hook for the tests of the snapshot and of a kill during the write:
// the background thread waits this many seconds before it writes.
void test_delay_before_write() {
  if (const char* delay = std::getenv("ACCELERATE_TEST_ASYNC_SAVE_DELAY"); delay != nullptr && *delay != '\0') {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(delay)));
  }
}

// The writer takes the CPU time the training leaves: at the lowest priority
// (nice 19, inherited by the checksum thread it starts), steps taken during
// the write slow down less where every core runs a rank. Linux applies a
// nice value to the one thread named by its id.
void lower_this_threads_priority() noexcept {
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
}

}  // namespace

struct AsyncStateSaver::Impl {
  // A communicator of the background writes: a duplicate, with an arrival
  // board of its own so that a timeout names the missing ranks. The board is
  // declared after the communicator: it detaches before the communicator is freed.
  struct WriterComm {
    accelerate::detail::UniqueComm owned;
    std::unique_ptr<accelerate::detail::ArrivalBoard> board;

    void duplicate(MPI_Comm comm) {  // collective over comm
      owned = accelerate::detail::duplicate_comm(comm);
      board = accelerate::detail::ArrivalBoard::attach(owned.get());
    }
    // After MPI_Finalize the board cannot detach: it is dropped (UniqueComm
    // already leaves a finalised communicator alone).
    void abandon_if_finalized() noexcept {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (finalized != 0) (void)board.release();
    }
  };

  WriterComm world;
  WriterComm node;
  detail::StateSnapshot snapshot;  // read by the writer thread only while it runs
  std::thread writer;
  std::exception_ptr failure;  // set by the writer thread, read after join()
  std::atomic<bool> writing{false};
  fs::path directory;
};

AsyncStateSaver::AsyncStateSaver() : impl_(std::make_unique<Impl>()) {}

AsyncStateSaver::~AsyncStateSaver() {
  try {
    (void)wait();
  } catch (const std::exception& error) {
    std::cerr << accelerate::detail::where() << " save_state: the background write of '" << impl_->directory.string()
              << "' failed and was never waited for (call wait(), load_state or end_training before the end): "
              << error.what() << std::endl;
  }
  impl_->node.abandon_if_finalized();
  impl_->world.abandon_if_finalized();
}

bool AsyncStateSaver::pending() const noexcept { return impl_->writer.joinable(); }

bool AsyncStateSaver::writing() const noexcept { return impl_->writing.load(std::memory_order_acquire); }

std::uint64_t AsyncStateSaver::staging_bytes() const noexcept { return impl_->snapshot.buffer_bytes(); }

std::optional<fs::path> AsyncStateSaver::wait() {
  if (!impl_->writer.joinable()) return std::nullopt;
  ACCELERATE_PROFILE_RANGE("accelerate::save_state_wait");
  impl_->writer.join();
  if (impl_->failure) std::rethrow_exception(std::exchange(impl_->failure, nullptr));
  return impl_->directory;
}

fs::path AsyncStateSaver::save(const State& state, ProjectConfiguration& project,
                               const std::optional<fs::path>& output_dir, const TrainingStateRefs& refs,
                               CheckpointInfo info) {
  (void)wait();  // one save at a time; the previous one's error is reported here
  if (state.thread_level_provided() != ThreadLevel::Multiple) {
    throw ConfigError(
        "save_state (asynchronous): the background write makes MPI calls from a thread of its own, "
        "which needs MPI_THREAD_MULTIPLE, but MPI runs at " +
        std::string(to_string(state.thread_level_provided())) +
        ". Start MPI at that level (ACCELERATE_MPI_THREAD_LEVEL=multiple, StateOptions::thread_level, "
        "or ProjectConfiguration::async_save before the Accelerator starts MPI), or save synchronously.");
  }
  if (detail::Hdf5Turn::held_by_this_thread()) {
    throw ConfigError(
        "save_state (asynchronous): a checkpoint file is open on this thread (a CheckpointReader or "
        "CheckpointWriter is alive), and HDF5 serves one thread at a time, so the background write "
        "would wait for it. Close it before saving.");
  }
  const detail::SavePlan plan = detail::plan_save(state, project, output_dir, refs, std::move(info));
  if (impl_->world.owned.get() == MPI_COMM_NULL) {
    impl_->world.duplicate(state.world_comm());  // collective: every rank passed plan_save's barrier
    impl_->node.duplicate(state.node_comm());
  }
  const MPI_Comm world_comm = impl_->world.owned.get();
  const MPI_Comm file_comm = plan.save_on_each_node ? impl_->node.owned.get() : world_comm;
  int file_ranks = 1;
  ACCELERATE_MPI_CHECK(MPI_Comm_size(file_comm, &file_ranks));
  // The copy is what blocks training. A rank whose copy failed (no memory, a
  // registered object's save threw) must not leave the others writing
  // without it until the timeout: the ranks agree first.
  std::string problem;
  {
    ACCELERATE_PROFILE_RANGE("accelerate::save_state_staging");
    torch::NoGradGuard no_grad;
    try {
      impl_->snapshot.begin(file_ranks);
      detail::write_state(impl_->snapshot, refs);
    } catch (const std::exception& error) {
      problem = error.what();
    }
  }
  const accelerate::detail::DeadlineComm world(world_comm, state.timeout());
  if (!detail::all_ranks_agree(world, problem.empty(), "save_state (did every rank copy its state?)")) {
    throw ConfigError("save_state (asynchronous): copying the state of '" + plan.directory.string() + "' failed " +
                      (problem.empty() ? std::string("on another rank (its error says why)") : "here: " + problem) +
                      ". Nothing was written; the previous checkpoints are unchanged.");
  }
  project.iteration += 1;
  impl_->directory = plan.drain_to.value_or(plan.directory);
  impl_->failure = nullptr;
  Impl* const impl = impl_.get();
  impl->writing.store(true, std::memory_order_release);
  impl_->writer = std::thread([impl, plan, world_comm, file_comm] {
    lower_this_threads_priority();
    try {
      test_delay_before_write();
      detail::write_and_commit(plan, world_comm, file_comm,
                               [impl](detail::StateWriter& writer) { impl->snapshot.replay(writer); }, {});
    } catch (...) {
      impl->failure = std::current_exception();
    }
    impl->writing.store(false, std::memory_order_release);
  });
  return impl_->directory;
}

}  // namespace accelerate::checkpoint
