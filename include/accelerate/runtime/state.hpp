// accelerate::State — the process's place in the job (Accelerate's
// PartialState / AcceleratorState).
//
// State owns the MPI lifetime when it initialised MPI, and adopts an MPI the
// program initialised itself otherwise (then it never finalises it). It
// derives three communicators from the one it is given:
//
//   world       duplicate of the given communicator (default MPI_COMM_WORLD)
//   node        ranks sharing a node (MPI_Comm_split_type SHARED)
//   cross_node  ranks with the same local rank, one per node
//
// Teardown is explicit and ordered: the derived communicators are freed
// (unless a timed-out collective abandoned them), then MPI is finalised if
// State initialised it. Nothing is left to atexit. Every moment that waits
// on the other ranks has a deadline (the timeout): MPI_Init and the layout
// discovery, and MPI_Finalize, run under the blocking-call watchdog; and a
// State destroyed by an exception, or after a collective timed out, does not
// finalise at all (a finalise waits for peers that may be gone: the program
// aborts the job instead, accelerate::abort_all).
// State is neither copyable nor movable; hold one for the program's life
// (Accelerator does) or pass it by reference.
//
// The accessors that return an MPI_Comm need accelerate/runtime/mpi_comm.hpp,
// which includes <mpi.h>; this header does not (runtime/comm_handle.hpp).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "accelerate/runtime/comm_handle.hpp"
#include "accelerate/runtime/device_id.hpp"
#include "accelerate/runtime/distributed_type.hpp"
#include "accelerate/runtime/launcher.hpp"
#include "accelerate/runtime/lifetime.hpp"
#include "accelerate/runtime/log_level.hpp"

namespace accelerate {
namespace detail {
class ArrivalBoard;
}  // namespace detail

/// MPI threading levels, in increasing order of support.
enum class ThreadLevel { Single, Funneled, Serialized, Multiple };

std::string_view to_string(ThreadLevel level);
/// "single", "funneled", "serialized" or "multiple" (lower case, as
/// ACCELERATE_MPI_THREAD_LEVEL and the configuration file take them);
/// anything else is a ConfigError naming the value.
ThreadLevel parse_thread_level(std::string_view text);

/// Each setting left unset takes its ACCELERATE_* environment variable, else
/// the default given here: explicit option > environment > default. (The
/// Accelerator adds the configuration file between the environment and the
/// default, and passes every setting explicitly.)
struct StateOptions {
  /// Run on the CPU even when GPUs are visible (Accelerate's `cpu=True`).
  /// ACCELERATE_USE_CPU; default false.
  std::optional<bool> cpu;
  /// Threading level required from MPI. FUNNELED: every MPI call the library
  /// makes comes from the thread that created State.
  /// ACCELERATE_MPI_THREAD_LEVEL; default FUNNELED.
  std::optional<ThreadLevel> thread_level;
  /// The communicator to run on (duplicated, never freed by State). Lets a
  /// coupled application give Accelerate-HPC a sub-communicator: an MPI_Comm
  /// converts to it where accelerate/runtime/mpi_comm.hpp is included.
  /// Default MPI_COMM_WORLD.
  CommHandle comm;
  /// Timeout for barriers and other blocking collectives State runs.
  /// ACCELERATE_TIMEOUT; default 1800 s.
  std::optional<std::chrono::seconds> timeout;
  /// Split each host into virtual nodes of this many consecutive local ranks
  /// (0 = one node per host). Emulates a multi-node layout on one machine.
  /// ACCELERATE_EMULATED_RANKS_PER_NODE; default 0.
  std::optional<int> emulated_ranks_per_node;
  /// Level of the Loggers built on this State. ACCELERATE_LOG_LEVEL; default Info.
  std::optional<LogLevel> log_level;
};

class State {
 public:
  /// Initialises (or adopts) MPI and discovers the layout. Collective over
  /// options.comm. Options left unset take their environment variables
  /// (ACCELERATE_USE_CPU, ACCELERATE_TIMEOUT, ACCELERATE_MPI_THREAD_LEVEL,
  /// ACCELERATE_EMULATED_RANKS_PER_NODE, ACCELERATE_LOG_LEVEL).
  explicit State(StateOptions options = {});
  ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  State(State&&) = delete;
  State& operator=(State&&) = delete;

  // --- layout -------------------------------------------------------------
  [[nodiscard]] int process_index() const noexcept { return rank_; }
  [[nodiscard]] int num_processes() const noexcept { return size_; }
  [[nodiscard]] int local_process_index() const noexcept { return local_rank_; }
  [[nodiscard]] int num_local_processes() const noexcept { return local_size_; }
  [[nodiscard]] int node_index() const noexcept { return node_index_; }
  [[nodiscard]] int num_nodes() const noexcept { return num_nodes_; }
  [[nodiscard]] bool is_main_process() const noexcept { return rank_ == 0; }
  [[nodiscard]] bool is_local_main_process() const noexcept { return local_rank_ == 0; }
  [[nodiscard]] bool is_last_process() const noexcept { return rank_ == size_ - 1; }
  [[nodiscard]] DistributedType distributed_type() const noexcept { return distributed_type_; }
  /// The CPU, or CUDA device local_rank % visible GPUs (accelerate::torch_device converts it).
  [[nodiscard]] const DeviceId& device() const noexcept { return device_; }
  [[nodiscard]] bool use_cpu() const noexcept { return device_.is_cpu(); }
  [[nodiscard]] const std::string& host() const noexcept { return host_; }

  // --- MPI ----------------------------------------------------------------
  // The communicators, as MPI_Comm: these three need
  // accelerate/runtime/mpi_comm.hpp (the default template argument is
  // complete only there; see runtime/comm_handle.hpp).
  template <class Mpi = detail::MpiComm>
  [[nodiscard]] typename Mpi::Comm world_comm() const noexcept {
    return world_.get<Mpi>();
  }
  template <class Mpi = detail::MpiComm>
  [[nodiscard]] typename Mpi::Comm node_comm() const noexcept {
    return node_.get<Mpi>();
  }
  template <class Mpi = detail::MpiComm>
  [[nodiscard]] typename Mpi::Comm cross_node_comm() const noexcept {
    return cross_node_.get<Mpi>();
  }
  [[nodiscard]] bool owns_mpi() const noexcept { return owns_mpi_; }
  [[nodiscard]] ThreadLevel thread_level_provided() const noexcept { return thread_provided_; }
  [[nodiscard]] const LauncherInfo& launcher() const noexcept { return launcher_; }
  [[nodiscard]] std::chrono::seconds timeout() const noexcept { return timeout_; }
  /// The thread level that was required (StateOptions::thread_level).
  [[nodiscard]] ThreadLevel thread_level_required() const noexcept { return thread_required_; }
  /// Virtual node size (0: one node per host).
  [[nodiscard]] int emulated_ranks_per_node() const noexcept { return emulated_ranks_per_node_; }
  /// The level Loggers on this State start with.
  [[nodiscard]] LogLevel log_level() const noexcept { return log_level_; }

  // --- process control (seeds: wait_for_everyone, print, …) ----------------
  /// Barrier over all processes; throws TimeoutError after timeout().
  void wait_for_everyone() const;
  /// The same barrier, whose TimeoutError names `what`: the collective call
  /// some process never reached (e.g. one called only on the main process).
  void wait_for_everyone(std::string_view what) const;
  /// Barrier over the processes of this node only.
  void wait_for_node() const;
  /// Prints `text` and a newline once per node: on the local main process
  /// (seeds: PartialState.print).
  void print(std::string_view text) const;

  /// One line describing this rank (rank, local rank, node, host, device, CPUs).
  [[nodiscard]] std::string describe() const;

  /// Ends with this State: loaders built on it stop with an Error after it is gone.
  [[nodiscard]] const Lifetime& lifetime() const noexcept { return lifetime_; }

 private:
  void agree_on_launcher(CommHandle comm, int world_rank, int world_size);
  void discover_layout(CommHandle comm, int emulated_ranks_per_node);
  void choose_device(bool force_cpu);
  /// Frees the communicators; finalises MPI if State owns it and `finalize`.
  void release(bool finalize) noexcept;
  void barrier(CommHandle comm, const std::string& what) const;

  bool owns_mpi_ = false;
  // Exceptions in flight when State was built: more at its destruction means
  // it is destroyed by one (an error path, which must not finalise).
  int uncaught_at_start_ = 0;
  ThreadLevel thread_provided_ = ThreadLevel::Single;
  CommHandle world_ = CommHandle::null();
  CommHandle node_ = CommHandle::null();
  CommHandle cross_node_ = CommHandle::null();
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int node_index_ = 0;
  int num_nodes_ = 1;
  DistributedType distributed_type_ = DistributedType::NO;
  DeviceId device_;
  std::string host_;
  LauncherInfo launcher_;
  std::chrono::seconds timeout_{1800};
  // One per communicator above: a timeout on it names the ranks that never
  // arrived (DeadlineComm finds them through the communicator).
  std::unique_ptr<detail::ArrivalBoard> boards_[3];
  ThreadLevel thread_required_ = ThreadLevel::Funneled;
  int emulated_ranks_per_node_ = 0;
  LogLevel log_level_ = LogLevel::Info;
  Lifetime lifetime_{"the State"};
};

}  // namespace accelerate
