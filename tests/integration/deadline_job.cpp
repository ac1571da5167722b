// A job in which one rank never reaches one collective step of a module
// (it sleeps instead): every other rank must fail within the timeout with a
// TimeoutError that names the step and the missing rank, print it, and
// abort the job. usage: deadline_job <operation> <missing rank>
//
// Each operation first prepares on every rank (a process group's creation
// is itself collective), then returns the step that one rank skips.
#include <accelerate/accelerate.hpp>
#include <accelerate/comm/process_group.hpp>
#include <accelerate/data/data_seed.hpp>
#include <accelerate/random/rng_state.hpp>
#include <accelerate/runtime/mpi_comm.hpp>
#include <accelerate/runtime/process_control.hpp>
#include <accelerate/training/find_executable_batch_size.hpp>
#if ACCELERATE_HAVE_HDF5
#include <accelerate/checkpoint/checkpoint_directory.hpp>
#include <accelerate/checkpoint/checkpoint_reader.hpp>
#include <accelerate/checkpoint/checkpoint_writer.hpp>

#include "detail/deadline_comm.hpp"
#endif

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>

namespace {

using accelerate::State;
constexpr std::chrono::seconds kTimeout{2};

using Step = std::function<void()>;
using Operation = std::function<Step(const State&)>;

// A step whose only preparation is the State.
template <class Fn>
Operation plain(Fn fn) {
  return [fn](const State& state) -> Step { return [fn, &state] { fn(state); }; };
}

// A step on a world ProcessGroup, created on every rank first.
template <class Fn>
Operation on_group(Fn fn) {
  return [fn](const State& state) -> Step {
    std::shared_ptr<accelerate::ProcessGroup> group =
        accelerate::ProcessGroup::world(state, {.abort_on_timeout = false});
    return [fn, group] { fn(*group); };
  };
}

// One step per module, each a public call that is collective.
std::map<std::string, Operation> operations() {
  std::map<std::string, Operation> ops;
  ops["main_process_first"] = plain([](const State& state) {
    const accelerate::MainProcessFirst guard(state, accelerate::MainProcessFirst::Scope::Global);
  });
  ops["data_seed"] = plain([](const State& state) {
    (void)accelerate::detail::choose_data_seed({}, true, &state, state.num_processes(), "deadline_job loader");
  });
  ops["synchronize_rng_states"] = on_group([](accelerate::ProcessGroup& group) {
    accelerate::synchronize_rng_states({"torch"}, group);
  });
  ops["find_executable_batch_size"] = on_group([](accelerate::ProcessGroup& group) {
    accelerate::find_executable_batch_size(group, 8, [](std::int64_t) {});
  });
#if ACCELERATE_HAVE_HDF5
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "accelerate_deadline_job";
  ops["checkpoint_writer"] = plain([dir](const State& state) {
    accelerate::checkpoint::CheckpointWriter writer(
        {.comm = state.world_comm(), .file = dir / "state.h5", .timeout = kTimeout}, {});
  });
  ops["checkpoint_reader"] = plain([dir](const State& state) {
    accelerate::checkpoint::CheckpointReader reader(
        {.comm = state.world_comm(), .file = dir / "state.h5", .timeout = kTimeout});
  });
  // The reader's count of ranks per host, the step after its agreed open: a
  // rank that dies between the two must not leave the others blocked.
  ops["checkpoint_host_count"] = plain([](const State& state) {
    (void)accelerate::detail::DeadlineComm(state.world_comm(), kTimeout)
        .ranks_on_this_host("CheckpointReader (counting the ranks on each host)");
  });
  ops["checkpoint_commit"] = plain([dir](const State& state) {
    accelerate::checkpoint::StagedCheckpoint staged(
        dir / "checkpoint_0", {.world = state.world_comm(), .file_comm = state.world_comm(), .timeout = kTimeout});
  });
#endif
  return ops;
}

}  // namespace

int main(int argc, char** argv) {
  const auto ops = operations();
  const auto op = argc == 3 ? ops.find(argv[1]) : ops.end();
  if (op == ops.end()) {
    std::cerr << "usage: deadline_job <operation> <missing rank>; operations:";
    for (const auto& [name, unused] : ops) std::cerr << ' ' << name;
    std::cerr << '\n';
    return 77;  // an operation this build lacks (no HDF5) is a skip
  }
  accelerate::StateOptions options;
  options.timeout = kTimeout;
  const State state(options);
  const Step step = op->second(state);
  if (state.process_index() == std::atoi(argv[2]) && state.num_processes() > 1) {
    std::this_thread::sleep_for(std::chrono::minutes(2));  // never arrives; the abort ends it
    return 0;
  }
  try {
    step();
  } catch (const accelerate::TimeoutError& error) {
    std::cout << "TimeoutError: " << error.what() << std::endl;
    accelerate::abort_all("the expected timeout", 3);
  }
  std::cout << argv[1] << " completed without rank " << argv[2] << std::endl;
  accelerate::abort_all("no timeout", 4);
}
