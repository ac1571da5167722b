// checkpoint::save and checkpoint::load (seeds: accelerate.utils.save and
// load) at 1, 2 and 4 ranks: who writes (the main process, or each node's
// local main), both formats read back exactly, Python's torch.load reading
// the pickled format, a failed save leaving the old file whole, and clear
// errors for files of another kind. And release_memory.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/serialize.h>
#include <torch/torch.h>
#include <sys/wait.h>
#include <torch/version.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "accelerate/checkpoint/save_load.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/device_memory.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/state.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

namespace fs = std::filesystem;
namespace ckpt = accelerate::checkpoint;

// One directory for the whole job, made by rank 0 and named to every rank.
fs::path job_directory(const accelerate::State& state) {
  char name[256] = {};
  if (state.is_main_process()) {
    const auto path = fs::temp_directory_path() / ("accelerate-save-load-" + std::to_string(::getpid()));
    fs::create_directories(path);
    std::snprintf(name, sizeof name, "%s", path.c_str());
  }
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, state.world_comm());
  return name;
}

std::map<std::string, at::Tensor> sample_tensors() {
  torch::manual_seed(7);
  return {{"fc1.weight", torch::randn({4, 3})},
          {"fc1.bias", torch::randn({4}).to(torch::kBFloat16)},
          {"step", torch::tensor({12}, torch::kLong)},
          {"mask", torch::tensor({true, false, true})},
          {"half", torch::randn({2, 2}).to(torch::kHalf)}};
}

void expect_same(const std::map<std::string, at::Tensor>& expected, const std::map<std::string, at::Tensor>& actual) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, tensor] : expected) {
    ASSERT_EQ(actual.count(name), 1U) << name;
    EXPECT_EQ(actual.at(name).scalar_type(), tensor.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(actual.at(name), tensor)) << name;
  }
}

class SaveLoad : public ::testing::Test {
 protected:
  accelerate::State state;
  fs::path directory = job_directory(state);
  void TearDown() override {
    MPI_Barrier(state.world_comm());
    if (state.is_main_process()) fs::remove_all(directory);
  }
};

TEST_F(SaveLoad, MainProcessWritesBothFormatsAndEveryRankReadsThemBack) {
  const auto tensors = sample_tensors();
  for (const bool safe : {false, true}) {
    const auto file = directory / (safe ? "state.safetensors" : "state.bin");
    const bool wrote = ckpt::save(state, tensors, file, {.safe_serialization = safe});
    EXPECT_EQ(wrote, state.is_main_process()) << "only the main process writes";
    MPI_Barrier(state.world_comm());
    expect_same(tensors, ckpt::load(file));
    expect_same(tensors, ckpt::load(file, torch::Device(torch::kCPU)));
    EXPECT_FALSE(fs::exists(fs::path(file) += ".partial"));
  }
}

TEST_F(SaveLoad, SaveOnEachNodeWritesOncePerNode) {
  accelerate::StateOptions options;
  options.emulated_ranks_per_node = 2;  // 4 ranks: two nodes of two
  const accelerate::State nodes(options);
  // Node-local paths in real jobs; one per node here, on a shared disk.
  const auto file = directory / ("node" + std::to_string(nodes.node_index()) + ".bin");
  const bool wrote = ckpt::save(nodes, sample_tensors(), file, {.save_on_each_node = true});
  EXPECT_EQ(wrote, nodes.is_local_main_process());
  MPI_Barrier(state.world_comm());
  expect_same(sample_tensors(), ckpt::load(file));
  int writers = wrote ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &writers, 1, MPI_INT, MPI_SUM, state.world_comm());
  EXPECT_EQ(writers, nodes.num_nodes());
}

TEST_F(SaveLoad, PythonTorchLoadReadsThePickledFormat) {
  const auto file = directory / "for_python.bin";
  ckpt::save(state, sample_tensors(), file);
  int status = 0;
  if (state.is_main_process()) {
    // Debian's python3-torch; skipped where no Python has torch, or only one
    // older than this LibTorch, which may write a format it does not know.
    const std::string probe =
        "import torch, sys; "
        "v = tuple(int(x) for x in torch.__version__.split('.')[:2]); "
        "sys.exit(77) if v < (" +
        std::to_string(TORCH_VERSION_MAJOR) + ", " + std::to_string(TORCH_VERSION_MINOR) +
        ") else None; "
        "d = torch.load(sys.argv[1]); "
        "assert sorted(d) == ['fc1.bias', 'fc1.weight', 'half', 'mask', 'step'], sorted(d); "
        "assert d['step'].item() == 12 and d['fc1.bias'].dtype == torch.bfloat16; "
        "assert d['mask'].tolist() == [True, False, True]";
    status = 77;
    for (const char* python : {"/usr/bin/python3", "python3"}) {
      if (std::system((std::string(python) + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0) continue;
      const int rc = std::system((std::string(python) + " -c \"" + probe + "\" " + file.string()).c_str());
      status = rc == 0 ? 0 : (WIFEXITED(rc) && WEXITSTATUS(rc) == 77 ? 77 : 1);
      break;
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, state.world_comm());
  if (status == 77) {
    GTEST_SKIP() << "no python3 whose torch is as new as this LibTorch " << TORCH_VERSION
                 << " (apt-get install python3-torch)";
  }
  EXPECT_EQ(status, 0) << "Python's torch.load rejected or misread the file";
}

TEST_F(SaveLoad, AFailedSaveLeavesThePreviousFileWhole) {
  const auto file = directory / "kept.safetensors";
  ckpt::save(state, sample_tensors(), file, {.safe_serialization = true});
  auto bad = sample_tensors();
  bad["complex"] = torch::zeros({2}, torch::kComplexFloat);  // safetensors has no complex dtype
  if (state.is_main_process()) {
    try {
      ckpt::save(state, bad, file, {.safe_serialization = true});
      ADD_FAILURE() << "a complex tensor was saved to safetensors";
    } catch (const accelerate::ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find("complex"), std::string::npos) << error.what();
    }
  }
  MPI_Barrier(state.world_comm());
  expect_same(sample_tensors(), ckpt::load(file));
  EXPECT_FALSE(fs::exists(fs::path(file) += ".partial"));
}

TEST_F(SaveLoad, FilesOfAnotherKindAreClearErrors) {
  const auto text = directory / ("notes" + std::to_string(state.process_index()) + ".txt");
  std::ofstream(text) << "not a checkpoint\n";
  EXPECT_THROW(ckpt::load(text), accelerate::ConfigError);
  try {
    ckpt::load(directory / "missing.bin");
    ADD_FAILURE() << "a missing file loaded";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("missing.bin' is not a file"), std::string::npos) << error.what();
  }
  // A torch.save file that is not a dict of tensors: a list.
  const auto list = directory / ("list" + std::to_string(state.process_index()) + ".bin");
  const auto bytes = torch::pickle_save(c10::IValue(c10::List<int64_t>({1, 2, 3})));
  std::ofstream(list, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  try {
    ckpt::load(list);
    ADD_FAILURE() << "a list loaded as a dict of tensors";
  } catch (const accelerate::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("not a dict of named tensors"), std::string::npos) << error.what();
  }
}

TEST(ReleaseMemory, DropsEveryReferenceItIsGiven) {
  auto tensor = torch::ones({1000});
  auto model = std::make_shared<torch::nn::LinearImpl>(4, 4);
  std::vector<at::Tensor> batch{torch::ones({2}), torch::ones({3})};
  const auto kept = tensor;  // another reference: the memory stays
  accelerate::release_memory(tensor, model, batch);
  EXPECT_FALSE(tensor.defined());
  EXPECT_EQ(model, nullptr);
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(kept.sum().item<float>(), 1000.0F);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
