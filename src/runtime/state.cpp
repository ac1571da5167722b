#include "accelerate/runtime/state.hpp"

#include <array>
#include <cstdio>
#include <exception>
#include <iostream>

#include "accelerate/error.hpp"
#include "accelerate/runtime/env_config.hpp"
#include "accelerate/runtime/host.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "detail/arrival_board.hpp"
#include "detail/blocking_call_watchdog.hpp"
#include "detail/deadline_comm.hpp"
#include "detail/mpi_check.hpp"
#include "detail/mpi_runtime.hpp"
#include "detail/unique_comm.hpp"
#include "runtime/device_probe.hpp"
#include "runtime/error_report.hpp"

namespace accelerate {
namespace {

int to_mpi(ThreadLevel level) {
  switch (level) {
    case ThreadLevel::Single: return MPI_THREAD_SINGLE;
    case ThreadLevel::Funneled: return MPI_THREAD_FUNNELED;
    case ThreadLevel::Serialized: return MPI_THREAD_SERIALIZED;
    case ThreadLevel::Multiple: return MPI_THREAD_MULTIPLE;
  }
  return MPI_THREAD_FUNNELED;
}

ThreadLevel from_mpi(int level) {
  if (level >= MPI_THREAD_MULTIPLE) return ThreadLevel::Multiple;
  if (level >= MPI_THREAD_SERIALIZED) return ThreadLevel::Serialized;
  if (level >= MPI_THREAD_FUNNELED) return ThreadLevel::Funneled;
  return ThreadLevel::Single;
}

// Frees `comm` under the rule for abandoned communicators (unique_comm.hpp).
void free_comm(CommHandle& comm) noexcept {
  const detail::UniqueComm owner(comm.get());
  comm = CommHandle::null();
}

// The error prefix before MPI can say which rank this is: the launcher's
// word, or the host alone.
std::string launcher_position(const LauncherInfo& launcher, const std::string& host) {
  if (launcher.rank && launcher.size) {
    return "[rank " + std::to_string(*launcher.rank) + "/" + std::to_string(*launcher.size) + " on " + host + "]";
  }
  return "[" + host + "]";
}

// MPI_Finalize waits for every rank in Open MPI and MPICH alike: a peer that
// is stopped or hangs would hold this process forever. Under the watchdog, it
// ends the process after the job's timeout instead.
// Unchecked: it runs in State's destructor and on a failed start-up, where it must not throw.
void finalize_within(std::chrono::seconds timeout) noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) return;
  try {
    const detail::BlockingCallWatchdog watchdog("MPI_Finalize (the collective exit every rank must reach)", timeout);
    MPI_Finalize();
  } catch (...) {
    MPI_Finalize();  // arming failed (no memory for the watchdog): finalise unwatched rather than leak MPI
  }
}

// Initialises MPI or adopts the running one; returns whether State owns it.
bool init_or_adopt_mpi(ThreadLevel required, ThreadLevel& provided, std::chrono::seconds timeout) {
  int initialized = 0;
  int finalized = 0;
  ACCELERATE_MPI_CHECK(MPI_Initialized(&initialized));
  ACCELERATE_MPI_CHECK(MPI_Finalized(&finalized));
  if (finalized != 0) {
    throw Error("[" + hostname() +
                "] accelerate::State: MPI has already been finalised in this process and cannot be started "
                "again. Create one State for the whole program (destroying the State that initialised MPI "
                "finalises it), or initialise MPI yourself and let every State adopt it.");
  }
  bool owns = false;
  int level = MPI_THREAD_SINGLE;
  if (initialized == 0) {
    // MPI is not yet usable, so errors here cannot carry a rank.
    const int code = MPI_Init_thread(nullptr, nullptr, to_mpi(required), &level);
    if (code != MPI_SUCCESS) {
      throw MpiError("[" + hostname() + "] MPI_Init_thread failed with code " + std::to_string(code) +
                         ". Is the program started by a launcher that belongs to the MPI it was built "
                         "with? 'accelerate-hpc env' prints which MPI that is.",
                     code);
    }
    owns = true;
  } else {
    ACCELERATE_MPI_CHECK(MPI_Query_thread(&level));
  }
  provided = from_mpi(level);
  if (provided < required) {
    // The prefix is taken now, while MPI runs: after finalize_within below
    // the constructor could name only the host.
    const std::string message =
        detail::where() + " accelerate::State: MPI provides thread level " + std::string(to_string(provided)) +
        " but " + std::string(to_string(required)) + " is required" +
        (owns ? std::string(". The MPI library was built without that level of thread support; use an "
                            "MPI built with it, or lower StateOptions::thread_level / "
                            "ACCELERATE_MPI_THREAD_LEVEL if the program only calls MPI from one thread.")
              : std::string(". The program initialised MPI itself at a lower level; call "
                            "MPI_Init_thread with at least that level, or let State initialise MPI."));
    if (owns) finalize_within(timeout);
    throw ConfigError(message);
  }
  return owns;
}

}  // namespace

ThreadLevel parse_thread_level(std::string_view text) {
  if (text == "single") return ThreadLevel::Single;
  if (text == "funneled") return ThreadLevel::Funneled;
  if (text == "serialized") return ThreadLevel::Serialized;
  if (text == "multiple") return ThreadLevel::Multiple;
  throw ConfigError("MPI thread level '" + std::string(text) +
                    "' is not one of single, funneled, serialized, multiple (ACCELERATE_MPI_THREAD_LEVEL, the "
                    "configuration file's mpi_thread_level).");
}

std::string_view to_string(ThreadLevel level) {
  switch (level) {
    case ThreadLevel::Single: return "MPI_THREAD_SINGLE";
    case ThreadLevel::Funneled: return "MPI_THREAD_FUNNELED";
    case ThreadLevel::Serialized: return "MPI_THREAD_SERIALIZED";
    case ThreadLevel::Multiple: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

State::State(StateOptions options) : uncaught_at_start_(std::uncaught_exceptions()), host_(hostname()) {
  // Explicit option > environment > default, setting by setting.
  const EnvConfig env = EnvConfig::from_environment();
  const bool cpu = options.cpu.value_or(env.use_cpu.value_or(false));
  timeout_ = options.timeout.value_or(env.timeout.value_or(std::chrono::seconds(1800)));
  thread_required_ = options.thread_level.value_or(env.mpi_thread_level ? parse_thread_level(*env.mpi_thread_level)
                                                                        : ThreadLevel::Funneled);
  emulated_ranks_per_node_ = options.emulated_ranks_per_node.value_or(env.emulated_ranks_per_node.value_or(0));
  log_level_ = options.log_level.value_or(env.log_level ? parse_log_level(*env.log_level) : LogLevel::Info);
  if (timeout_.count() <= 0) {
    throw ConfigError("[" + host_ + "] accelerate::State: the timeout is " + std::to_string(timeout_.count()) +
                      " s; barriers and collectives need a positive deadline.");
  }
  if (emulated_ranks_per_node_ < 0) {
    throw ConfigError("[" + host_ + "] accelerate::State: emulated_ranks_per_node is " +
                      std::to_string(emulated_ranks_per_node_) + "; use 0 (one node per host) or a positive size.");
  }

  // Read the launcher's variables before MPI_Init: some MPI libraries add
  // their own on initialisation, and a GPU is best chosen before MPI starts.
  launcher_ = detect_launcher();
  // MPI_Init (a fence over all ranks in Open MPI) and the communicators of
  // the layout are blocking collectives with no deadline of their own: a
  // rank that never starts, or is stopped, would hold every other one here.
  const detail::BlockingCallWatchdog start_up("MPI start-up (MPI_Init_thread, then the communicators of the layout)",
                                              timeout_, launcher_position(launcher_, host_));
  owns_mpi_ = init_or_adopt_mpi(thread_required_, thread_provided_, timeout_);
  try {
    int world_rank = 0;
    int world_size = 0;
    ACCELERATE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    ACCELERATE_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    (void)detail::world_position();  // cached now, on the main thread, for error messages from any thread
    agree_on_launcher(options.comm, world_rank, world_size);
    discover_layout(options.comm, emulated_ranks_per_node_);
    // A communicator for abort_all's reports alone (runtime/error_report.hpp).
    detail::open_error_report(this, world_.get());
    choose_device(cpu);
  } catch (...) {
    release(/*finalize=*/true);  // the ranks agreed on the failure, or its own MPI error ended this rank alone
    throw;
  }
}

State::~State() {
  // On an error path (an exception destroys State) or after a collective
  // timed out (a peer is known to be missing), MPI is left running: the
  // collective exit would wait for ranks that may never come. The program's
  // handler aborts the job (accelerate::abort_all, as jobs/train does); a
  // process that just returns ends without finalising, which the launcher
  // reports and answers by ending the job.
  const bool unwinding = std::uncaught_exceptions() > uncaught_at_start_;
  release(!unwinding && !detail::any_abandoned());
}

void State::release(bool finalize) noexcept {
  // Boards (they detach from their communicators), communicators, then MPI
  // itself, and only if State started it.
  for (auto& board : boards_) board.reset();
  // On an error path abort_all still needs the error-report communicator
  // after this State is gone (main's handler runs after the unwinding).
  if (finalize) {
    detail::close_error_report(this);
  } else {
    detail::keep_error_report(this);
  }
  free_comm(cross_node_);
  free_comm(node_);
  free_comm(world_);
  if (owns_mpi_) {
    if (finalize) finalize_within(timeout_);
    owns_mpi_ = false;
  }
}

void State::agree_on_launcher(CommHandle comm, int world_rank, int world_size) {
  // A disagreement may be seen by some ranks only (a stale rank variable):
  // agree on the verdict first, so no rank walks on into a collective that
  // the failing ones will never join.
  std::string failure;
  try {
    check_launcher_matches_mpi(launcher_, world_rank, world_size);
  } catch (const LaunchError& error) {
    failure = error.what();
  }
  int local_failed = failure.empty() ? 0 : 1;
  int any_failed = 0;
  ACCELERATE_MPI_CHECK(MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, comm.get()));
  if (!failure.empty()) throw LaunchError(failure);
  if (any_failed != 0) {
    throw LaunchError(
        "accelerate::State: another rank found that the launcher's "
        "environment disagrees with MPI; its message names the cause.");
  }
}

void State::discover_layout(CommHandle comm, int emulated_ranks_per_node) {
  // Each communicator is stored as soon as it exists, so that release() frees
  // it if a later step fails.
  MPI_Comm world = MPI_COMM_NULL;
  ACCELERATE_MPI_CHECK(MPI_Comm_dup(comm.get(), &world));
  world_ = world;
  // Errors on the library's communicators come back as codes, so they can
  // be reported with context instead of aborting inside MPI.
  ACCELERATE_MPI_CHECK(MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN));
  ACCELERATE_MPI_CHECK(MPI_Comm_rank(world, &rank_));
  ACCELERATE_MPI_CHECK(MPI_Comm_size(world, &size_));

  MPI_Comm node = MPI_COMM_NULL;
  detail::UniqueComm host_comm;
  ACCELERATE_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, host_comm.out()));
  if (emulated_ranks_per_node > 0) {
    int host_rank = 0;
    ACCELERATE_MPI_CHECK(MPI_Comm_rank(host_comm.get(), &host_rank));
    ACCELERATE_MPI_CHECK(MPI_Comm_split(host_comm.get(), host_rank / emulated_ranks_per_node, rank_, &node));
  } else {
    node = host_comm.release();
  }
  node_ = node;
  ACCELERATE_MPI_CHECK(MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN));
  ACCELERATE_MPI_CHECK(MPI_Comm_rank(node, &local_rank_));
  ACCELERATE_MPI_CHECK(MPI_Comm_size(node, &local_size_));

  // Number the nodes by their local main process's rank: the local mains
  // form a communicator whose rank is the node index, which each local main
  // then shares with its node.
  std::array<int, 2> node_info{0, 1};
  {
    detail::UniqueComm leaders;
    ACCELERATE_MPI_CHECK(MPI_Comm_split(world, local_rank_ == 0 ? 0 : MPI_UNDEFINED, rank_, leaders.out()));
    if (leaders) {
      ACCELERATE_MPI_CHECK(MPI_Comm_rank(leaders.get(), &node_info[0]));
      ACCELERATE_MPI_CHECK(MPI_Comm_size(leaders.get(), &node_info[1]));
    }
  }
  ACCELERATE_MPI_CHECK(MPI_Bcast(node_info.data(), 2, MPI_INT, 0, node));
  node_index_ = node_info[0];
  num_nodes_ = node_info[1];

  MPI_Comm cross_node = MPI_COMM_NULL;
  ACCELERATE_MPI_CHECK(MPI_Comm_split(world, local_rank_, node_index_, &cross_node));
  cross_node_ = cross_node;
  ACCELERATE_MPI_CHECK(MPI_Comm_set_errhandler(cross_node, MPI_ERRORS_RETURN));
  boards_[0] = detail::ArrivalBoard::attach(world);
  boards_[1] = detail::ArrivalBoard::attach(node);
  boards_[2] = detail::ArrivalBoard::attach(cross_node);
}

void State::choose_device(bool force_cpu) {
  const int gpus = force_cpu ? 0 : detail::visible_cuda_devices();
  if (gpus > 0) {
    device_ = DeviceId::cuda(local_rank_ % gpus);
    detail::bind_cuda_device(local_rank_ % gpus);
  } else {
    device_ = DeviceId::cpu();
  }
  if (size_ == 1) {
    distributed_type_ = DistributedType::NO;
  } else {
    distributed_type_ = gpus > 0 ? DistributedType::MULTI_GPU : DistributedType::MULTI_CPU;
  }
}

void State::barrier(CommHandle comm, const std::string& what) const {
  detail::DeadlineComm(comm.get(), timeout_).barrier(what);
}

void State::wait_for_everyone() const { barrier(world_, "wait_for_everyone (barrier over all processes)"); }

void State::wait_for_everyone(std::string_view what) const { barrier(world_, std::string(what)); }

void State::wait_for_node() const {
  barrier(node_, "barrier over the processes of node " + std::to_string(node_index_));
}

void State::print(std::string_view text) const {
  if (!is_local_main_process()) return;
  std::cout << text << '\n' << std::flush;
}

std::string State::describe() const {
  return "rank " + std::to_string(rank_) + "/" + std::to_string(size_) + " local " + std::to_string(local_rank_) + "/" +
         std::to_string(local_size_) + " node " + std::to_string(node_index_) + "/" + std::to_string(num_nodes_) +
         " host " + host_ + " device " + device_.str() + " cpus " + format_cpu_list(allowed_cpus()) + " type " +
         std::string(to_string(distributed_type_)) + " launcher " + std::string(to_string(launcher_.kind));
}

}  // namespace accelerate
