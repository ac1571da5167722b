// A small program that saves and loads training-state-like checkpoints, for
// the integration scripts (resharding across mpirun invocations, SIGKILL in
// the middle of a save, stock HDF5 tools, symbol bindings).
//
//   checkpoint_job save <root> <iteration> [total_limit]
//       writes <root>/checkpoint_<iteration>: model and Adam-like state derived
//       from the iteration, one RNG row per rank, a scheduler attribute.
//   checkpoint_job load <root> <expected_iteration>
//       loads latest_checkpoint(<root>), checks it is checkpoint_<expected>
//       and that every value is what `save` wrote, on any number of ranks.
//   checkpoint_job export <dir> <max_shard_bytes>
//       save_model() of the iteration-1 model as safetensors (rank 0).
//   checkpoint_job import <file|index|folder>
//       load_checkpoint_in_model() of {a: float32 [2, 3], b: int64 [3]},
//       strict, expecting a = 0..5 and b = [1, 2, 3].
#include <mpi.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "accelerate/checkpoint/checkpoint_directory.hpp"
#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/checkpoint/checkpoint_writer.hpp"
#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/checkpoint/safetensors.hpp"
#include "accelerate/training_state/project_configuration.hpp"

namespace ckpt = accelerate::checkpoint;
namespace fs = std::filesystem;

namespace {

struct Param {
  const char* name;
  std::vector<int64_t> shape;
  at::ScalarType type;
};

const std::vector<Param>& params() {
  static const std::vector<Param> list{{"fc1.weight", {512, 1024}, at::kFloat},
                                       {"fc1.bias", {512}, at::kFloat},
                                       {"fc2.weight", {10, 512}, at::kBFloat16},
                                       {"fc2.bias", {10}, at::kHalf},
                                       {"embedding.weight", {1000, 300}, at::kDouble},
                                       {"mask", {7, 3}, at::kBool}};
  return list;
}

at::Tensor value_of(const Param& p, int iteration, int salt) {
  const auto n = c10::multiply_integers(p.shape);
  at::Tensor base = at::arange(static_cast<double>(n), at::kDouble).mul(0.001 * (salt + 1)).add(iteration).cos();
  if (p.type == at::kBool) return base.gt(0).reshape(p.shape);
  return base.to(p.type).reshape(p.shape);
}

at::Tensor rng_row(int rank, int iteration) { return at::arange(8, at::kLong).add(1000 * rank + iteration); }

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "checkpoint_job: " << message << std::endl;
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

void save(const fs::path& root, int iteration, std::optional<int> total_limit) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ckpt::StagedCheckpoint staged(root / ("checkpoint_" + std::to_string(iteration)), {});
  {
    ckpt::CheckpointWriter writer({.file = staged.file_path()}, {.step = 100 * iteration, .iteration = iteration});
    int salt = 0;
    for (const Param& p : params()) {
      writer.write_replicated("pytorch_model/" + std::string(p.name), value_of(p, iteration, salt));
      if (p.type != at::kBool) {
        writer.write_replicated("optimizer/state/" + std::string(p.name) + "/exp_avg", value_of(p, iteration, salt + 50));
        writer.write_replicated("optimizer/state/" + std::string(p.name) + "/exp_avg_sq",
                                value_of(p, iteration, salt + 90));
      }
      ++salt;
    }
    writer.write_per_rank("random_states/torch", rng_row(rank, iteration));
    writer.set_attribute("scheduler", "state", std::string(R"({"last_epoch":)") + std::to_string(iteration) + "}");
    writer.close();
  }
  staged.commit(true, ckpt::Manifest{.step = 100 * iteration, .iteration = iteration, .world_size = size},
                total_limit);
  if (rank == 0) std::cout << "saved checkpoint_" << iteration << " on " << size << " ranks" << std::endl;
}

void load(const fs::path& root, int expected) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const auto latest = ckpt::latest_checkpoint(root);
  if (!latest) fail("no complete checkpoint under " + root.string());
  if (latest->filename() != "checkpoint_" + std::to_string(expected)) {
    fail("latest checkpoint is " + latest->string() + ", expected checkpoint_" + std::to_string(expected));
  }
  ckpt::CheckpointReader reader({.file = *latest / ckpt::STATE_FILE_NAME});
  if (reader.header().iteration != expected) fail("iteration attribute differs");
  std::map<std::string, at::Tensor> model;
  for (const Param& p : params()) model[p.name] = at::empty(p.shape, at::TensorOptions().dtype(p.type));
  const ckpt::KeyReport report = reader.load_into("pytorch_model", model, /*strict=*/true);
  int salt = 0;
  for (const Param& p : params()) {
    if (!at::equal(model[p.name], value_of(p, expected, salt))) fail(std::string("wrong values in ") + p.name);
    if (p.type != at::kBool &&
        !at::equal(reader.read_replicated("optimizer/state/" + std::string(p.name) + "/exp_avg_sq"),
                   value_of(p, expected, salt + 90))) {
      fail(std::string("wrong optimizer state of ") + p.name);
    }
    ++salt;
  }
  const int row = reader.per_rank_source_row();
  if (!at::equal(reader.read_per_rank("random_states/torch"), rng_row(row, expected))) fail("wrong RNG row");
  if (rank == 0) {
    std::cout << "loaded " << latest->filename().string() << " (saved on " << reader.header().world_size
              << " ranks) on " << size << " ranks" << std::endl;
  }
}

void export_model(const fs::path& dir, std::uint64_t max_shard) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  int salt = 0;
  for (const Param& p : params()) tensors.emplace_back(p.name, value_of(p, 1, salt++));
  const auto files = ckpt::save_model(tensors, dir, {.max_shard_size = max_shard});
  // Read back through the same path a user would take.
  std::map<std::string, at::Tensor> model;
  for (const Param& p : params()) model[p.name] = at::zeros(p.shape, at::TensorOptions().dtype(p.type));
  ckpt::load_checkpoint_in_model(model, dir, /*strict=*/true);
  salt = 0;
  for (const Param& p : params()) {
    if (!at::equal(model[p.name], value_of(p, 1, salt++))) fail(std::string("export round trip differs: ") + p.name);
  }
  std::cout << "exported " << files.size() << " file(s)" << std::endl;
}

void import_model(const fs::path& path) {
  std::map<std::string, at::Tensor> model{{"a", at::zeros({2, 3}, at::kFloat)}, {"b", at::zeros({3}, at::kLong)}};
  ckpt::load_checkpoint_in_model(model, path, /*strict=*/true);
  if (!at::equal(model["a"], at::arange(6, at::kFloat).reshape({2, 3}))) fail("imported 'a' differs");
  if (!at::equal(model["b"], at::arange(1, 4, at::kLong))) fail("imported 'b' differs");
  std::cout << "imported OK" << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // The kill test finds the processes to kill here.
  // One write, so that lines of several ranks do not interleave.
  std::fprintf(stderr, "checkpoint_job pid %d rank %d\n", static_cast<int>(::getpid()), rank);
  if (argc >= 3 && std::string(argv[1]) == "import") {
    try {
      import_model(argv[2]);
    } catch (const std::exception& error) {
      fail(error.what());
    }
    MPI_Finalize();
    return 0;
  }
  if (argc < 4) fail("usage: checkpoint_job save|load <root> <iteration> [total_limit]");
  const std::string mode = argv[1];
  const fs::path root = argv[2];
  const int iteration = std::atoi(argv[3]);
  try {
    if (mode == "save") {
      save(root, iteration, argc > 4 ? std::optional<int>(std::atoi(argv[4])) : std::nullopt);
    } else if (mode == "load") {
      load(root, iteration);
    } else if (mode == "export") {
      export_model(root, std::stoull(argv[3]));
    } else {
      fail("unknown mode " + mode);
    }
  } catch (const std::exception& error) {
    fail(error.what());
  }
  MPI_Finalize();
  return 0;
}
