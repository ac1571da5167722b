// A job in which one rank is SIGKILLed while every rank repeats one
// collective family: the survivors must end, non-zero, within the timeout
// plus a few seconds, with a message naming the dead rank; a checkpoint
// committed before the kill must stay intact.
//
//   fault_job <operation> <victim rank> <work dir>
//       operations: all_reduce, broadcast_object, dispatcher_scatter,
//       checkpoint_write, checkpoint_load. Every rank prepares, then loops
//       over the operation; the victim arms a timer that SIGKILLs it from
//       another thread while its main thread is inside the loop.
//   fault_job verify <work dir>
//       loads the latest committed checkpoint under <work dir> and checks
//       every value against the iteration it names.
#include <accelerate/accelerate.hpp>
#include <accelerate/comm/process_group.hpp>
#include <accelerate/data/data_loader_dispatcher.hpp>
#include <accelerate/runtime/mpi_comm.hpp>
#include <accelerate/runtime/process_control.hpp>
#if ACCELERATE_HAVE_HDF5
#include <accelerate/checkpoint/checkpoint_directory.hpp>
#include <accelerate/checkpoint/checkpoint_reader.hpp>
#include <accelerate/checkpoint/checkpoint_writer.hpp>
#include <accelerate/checkpoint/constants.hpp>
#endif

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <thread>

namespace {

namespace fs = std::filesystem;
using accelerate::State;

constexpr std::chrono::seconds kTimeout{3};
// How long the victim runs the loop before it is killed: long enough that
// every rank is inside it, short enough to keep the test quick.
constexpr std::chrono::milliseconds kKillAfter{1500};
// No loop runs longer than this without the kill ending it.
constexpr std::chrono::seconds kLoopLimit{60};

/// Kills this process with SIGKILL from a detached thread after `delay`,
/// while the main thread carries on inside the collectives. The moment of the
/// kill (Unix time in ms) goes to <dir>/killed_at, for the test to time the
/// survivors against.
void arm_kill(std::chrono::milliseconds delay, const fs::path& dir) {
  std::thread([delay, dir] {
    std::this_thread::sleep_for(delay);
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    if (std::FILE* file = std::fopen((dir / "killed_at").c_str(), "w")) {
      std::fprintf(file, "%lld\n", static_cast<long long>(now.count()));
      std::fclose(file);
    }
    std::fprintf(stderr, "fault_job: killing rank pid %d now\n", static_cast<int>(::getpid()));
    std::raise(SIGKILL);
  }).detach();
}

/// Runs `step` until the loop limit; the victim arms its kill after `warmup`
/// steps (so that a checkpoint is committed first where the step saves one).
void repeat(const State& state, int victim, int warmup, const fs::path& dir, const std::function<void(int)>& step) {
  const auto end = std::chrono::steady_clock::now() + kLoopLimit;
  for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
    if (i == warmup && state.process_index() == victim) arm_kill(kKillAfter, dir);
    step(i);
  }
}

/// Sample i: data [i, 2i], target i.
class IndexDataset : public torch::data::datasets::Dataset<IndexDataset> {
 public:
  torch::data::Example<> get(std::size_t index) override {
    const auto f = static_cast<float>(index);
    return {torch::tensor({f, 2 * f}), torch::tensor(static_cast<std::int64_t>(index))};
  }
  [[nodiscard]] torch::optional<std::size_t> size() const override { return 4096; }
};

#if ACCELERATE_HAVE_HDF5
namespace ckpt = accelerate::checkpoint;

at::Tensor weights(int iteration) { return at::arange(1 << 20, at::kFloat).add(iteration); }
at::Tensor rng_row(int rank, int iteration) { return at::arange(8, at::kLong).add(1000 * rank + iteration); }

void save(const State& state, const fs::path& root, int iteration) {
  ckpt::StagedCheckpoint staged(root / ("checkpoint_" + std::to_string(iteration)),
                                {.world = state.world_comm(), .file_comm = state.world_comm(), .timeout = kTimeout});
  {
    ckpt::CheckpointWriter writer({.comm = state.world_comm(), .file = staged.file_path(), .timeout = kTimeout},
                                  {.step = iteration, .iteration = iteration});
    writer.write_replicated("pytorch_model/weight", weights(iteration));
    writer.write_per_rank("random_states/torch", rng_row(state.process_index(), iteration));
    writer.close();
  }
  staged.commit(true, ckpt::Manifest{.step = iteration, .iteration = iteration, .world_size = state.num_processes()},
                /*total_limit=*/2);
}

/// Loads the latest committed checkpoint and checks it; returns its iteration.
int load(const State& state, const fs::path& root) {
  const auto latest = ckpt::latest_checkpoint(root);
  if (!latest) throw std::runtime_error("no committed checkpoint under " + root.string());
  ckpt::CheckpointReader reader(
      {.comm = state.world_comm(), .file = *latest / ckpt::STATE_FILE_NAME, .timeout = kTimeout});
  const int iteration = static_cast<int>(reader.header().iteration);
  if (latest->filename() != "checkpoint_" + std::to_string(iteration)) {
    throw std::runtime_error(latest->string() + " holds iteration " + std::to_string(iteration));
  }
  if (!at::equal(reader.read_replicated("pytorch_model/weight"), weights(iteration))) {
    throw std::runtime_error("wrong weights in " + latest->string());
  }
  if (!at::equal(reader.read_per_rank("random_states/torch"), rng_row(reader.per_rank_source_row(), iteration))) {
    throw std::runtime_error("wrong RNG row in " + latest->string());
  }
  return iteration;
}
#endif

using Operation = std::function<void(const State&, int victim, const fs::path& dir)>;

std::map<std::string, Operation> operations() {
  std::map<std::string, Operation> ops;
  ops["all_reduce"] = [](const State& state, int victim, const fs::path& dir) {
    auto group = accelerate::ProcessGroup::world(state, {.timeout = kTimeout});
    at::Tensor t = at::ones({1 << 16});
    repeat(state, victim, 0, dir, [&](int) { group->all_reduce(t); });
  };
  ops["broadcast_object"] = [](const State& state, int victim, const fs::path& dir) {
    auto group = accelerate::ProcessGroup::world(state, {.timeout = kTimeout});
    repeat(state, victim, 0, dir, [&](int i) {
      c10::IValue object = state.is_main_process() ? c10::IValue(std::string("step ") + std::to_string(i))
                                                  : c10::IValue();
      group->broadcast_object(object);
    });
  };
  ops["dispatcher_scatter"] = [](const State& state, int victim, const fs::path& dir) {
    accelerate::DataLoaderDispatcher loader(IndexDataset(), state, {.batch_size = 4});
    repeat(state, victim, 0, dir, [&](int) {
      for (const auto& batch : loader) (void)batch;
    });
  };
#if ACCELERATE_HAVE_HDF5
  ops["checkpoint_write"] = [](const State& state, int victim, const fs::path& dir) {
    repeat(state, victim, 1, dir, [&](int i) { save(state, dir, i); });
  };
  ops["checkpoint_load"] = [](const State& state, int victim, const fs::path& dir) {
    save(state, dir, 0);
    repeat(state, victim, 0, dir, [&](int) { (void)load(state, dir); });
  };
#endif
  return ops;
}

int usage(const std::map<std::string, Operation>& ops) {
  std::cerr << "usage: fault_job <operation> <victim rank> <work dir> | verify <work dir>; operations:";
  for (const auto& [name, unused] : ops) std::cerr << ' ' << name;
  std::cerr << '\n';
  return 77;  // an operation this build lacks (no HDF5) is a skip
}

}  // namespace

int main(int argc, char** argv) {
  const auto ops = operations();
  const std::string name = argc > 1 ? argv[1] : "";
#if ACCELERATE_HAVE_HDF5
  if (name == "verify" && argc == 3) {
    const State state({.timeout = kTimeout});
    try {
      const int iteration = load(state, argv[2]);
      state.print("verified checkpoint_" + std::to_string(iteration));
    } catch (const std::exception& error) {
      std::cout << "verify failed: " << error.what() << std::endl;
      accelerate::abort_all("verify failed", 5);
    }
    return 0;
  }
#endif
  const auto op = argc == 4 ? ops.find(name) : ops.end();
  if (op == ops.end()) return usage(ops);
  const State state({.timeout = kTimeout});
  // One write, so that lines of several ranks do not interleave.
  std::fprintf(stderr, "fault_job pid %d rank %d\n", static_cast<int>(::getpid()), state.process_index());
  try {
    op->second(state, std::atoi(argv[2]), argv[3]);
  } catch (const accelerate::TimeoutError& error) {
    std::cout << "TimeoutError: " << error.what() << std::endl;
    accelerate::abort_all("a rank stopped answering", 3);
  } catch (const std::exception& error) {
    std::cout << "error: " << error.what() << std::endl;
    accelerate::abort_all("a collective failed", 4);
  }
  std::cout << "fault_job: the loop ended without the kill" << std::endl;
  return 6;
}
