// set_seed, seed_from_job and RNG state capture/restore in one process.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <cstdlib>

#include "accelerate/error.hpp"
#include "accelerate/random/rng_state.hpp"
#include "accelerate/random/seed.hpp"
#include "accelerate/runtime/environment.hpp"
#include "accelerate/runtime/state.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::ConfigError;
using accelerate::testing::error_of;

TEST(SetSeed, SameSeedSameNumbers) {
  accelerate::set_seed(1234);
  const auto first = torch::randn({16});
  const int first_rand = std::rand();
  accelerate::set_seed(1234);
  const auto second = torch::randn({16});
  const int second_rand = std::rand();
  EXPECT_TRUE(torch::equal(first, second));
  EXPECT_EQ(first_rand, second_rand);
  accelerate::set_seed(1235);
  EXPECT_FALSE(torch::equal(first, torch::randn({16})));
}

TEST(SetSeed, DeviceSpecificNeedsTheStateAndAddsTheRank) {
  EXPECT_NE(error_of([] { accelerate::set_seed(5, true); }).find("needs the State"), std::string::npos);
  const accelerate::State state;  // a world of one: rank 0
  accelerate::set_seed(5, true, false, &state);
  const auto specific = torch::randn({8});
  EXPECT_EQ(accelerate::base_seed().value_or(0), 5U);  // before the rank offset
  accelerate::set_seed(5 + static_cast<std::uint64_t>(state.process_index()));
  EXPECT_TRUE(torch::equal(specific, torch::randn({8})));
  EXPECT_EQ(accelerate::base_seed().value_or(0), 5U + static_cast<std::uint64_t>(state.process_index()));
}

class DeterministicGuard {
 public:
  DeterministicGuard()
      : algorithms_(at::globalContext().deterministicAlgorithms()),
        cudnn_(at::globalContext().deterministicCuDNN()),
        benchmark_(at::globalContext().benchmarkCuDNN()) {}
  ~DeterministicGuard() {
    at::globalContext().setDeterministicAlgorithms(algorithms_, false);
    at::globalContext().setDeterministicCuDNN(cudnn_);
    at::globalContext().setBenchmarkCuDNN(benchmark_);
  }

 private:
  bool algorithms_;
  bool cudnn_;
  bool benchmark_;
};

TEST(SetSeed, DeterministicTurnsEverythingOn) {
  const DeterministicGuard restore;
  at::globalContext().setDeterministicAlgorithms(false, false);
  at::globalContext().setDeterministicCuDNN(false);
  at::globalContext().setBenchmarkCuDNN(true);
  {
    const auto cleared = accelerate::clear_environment();
    accelerate::set_seed(7, false, /*deterministic=*/true);
    EXPECT_EQ(accelerate::get_env("CUBLAS_WORKSPACE_CONFIG").value_or("<unset>"), ":4096:8");
  }
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  EXPECT_TRUE(at::globalContext().deterministicCuDNN());
  EXPECT_FALSE(at::globalContext().benchmarkCuDNN());
  {
    // A value the user chose is kept; deterministic = false switches nothing off.
    const auto patch = accelerate::patch_environment({{"CUBLAS_WORKSPACE_CONFIG", ":16:8"}});
    accelerate::set_seed(7, false, true);
    EXPECT_EQ(accelerate::get_env("CUBLAS_WORKSPACE_CONFIG").value_or(""), ":16:8");
    accelerate::set_seed(7);
    EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  }
}

TEST(SetSeed, NonDeterministicLeavesSettingsAlone) {
  const DeterministicGuard restore;
  at::globalContext().setDeterministicAlgorithms(false, false);
  const auto cleared = accelerate::clear_environment();
  accelerate::set_seed(7);
  EXPECT_FALSE(at::globalContext().deterministicAlgorithms());
  EXPECT_FALSE(accelerate::get_env("CUBLAS_WORKSPACE_CONFIG").has_value());
}

// --- seed_from_job ------------------------------------------------------------

std::uint64_t seed_with(const std::map<std::string, std::string>& variables) {
  const auto cleared = accelerate::clear_environment();
  const auto patch = accelerate::patch_environment(variables);
  return accelerate::seed_from_job();
}

TEST(SeedFromJob, GoldenValuesOfTheDocumentedHash) {
  // Computed independently from the formula in docs/reproducibility.md.
  EXPECT_EQ(accelerate::job_seed_of("slurm:1000"), 0xedcbcb7241fd6c76ULL);
  EXPECT_EQ(accelerate::job_seed_of("slurm:1000:3"), 0x53f932e66c9d6aedULL);
  EXPECT_EQ(accelerate::job_seed_of("pbs:123.server"), 0x744822fe0375961dULL);
  EXPECT_EQ(seed_with({{"SLURM_JOB_ID", "1000"}}), 0xedcbcb7241fd6c76ULL);
}

TEST(SeedFromJob, SlurmRequeueReproducesArrayTasksDiffer) {
  const auto job = seed_with({{"SLURM_JOB_ID", "1000"}});
  EXPECT_EQ(seed_with({{"SLURM_JOB_ID", "1000"}}), job);  // requeued: same id
  EXPECT_NE(seed_with({{"SLURM_JOB_ID", "1001"}}), job);
  const auto task1 =
      seed_with({{"SLURM_JOB_ID", "1001"}, {"SLURM_ARRAY_JOB_ID", "1000"}, {"SLURM_ARRAY_TASK_ID", "1"}});
  const auto task2 =
      seed_with({{"SLURM_JOB_ID", "1002"}, {"SLURM_ARRAY_JOB_ID", "1000"}, {"SLURM_ARRAY_TASK_ID", "2"}});
  EXPECT_NE(task1, task2);
  EXPECT_NE(task1, job);
  // The array identity decides, whatever per-task job id a requeue shows.
  EXPECT_EQ(seed_with({{"SLURM_JOB_ID", "2001"}, {"SLURM_ARRAY_JOB_ID", "1000"}, {"SLURM_ARRAY_TASK_ID", "1"}}),
            task1);
  EXPECT_EQ(task1, accelerate::job_seed_of("slurm:1000:1"));
}

TEST(SeedFromJob, Pbs) {
  const auto job = seed_with({{"PBS_JOBID", "123.server"}});
  EXPECT_EQ(seed_with({{"PBS_JOBID", "123.server"}}), job);
  const auto sub1 = seed_with({{"PBS_JOBID", "124[].server"}, {"PBS_ARRAY_INDEX", "1"}});
  const auto sub2 = seed_with({{"PBS_JOBID", "124[].server"}, {"PBS_ARRAY_INDEX", "2"}});
  const auto torque = seed_with({{"PBS_JOBID", "124[].server"}, {"PBS_ARRAYID", "2"}});
  EXPECT_NE(sub1, sub2);
  EXPECT_EQ(sub2, torque);
  EXPECT_NE(sub1, job);
  // Slurm wins when both are present (e.g. PBS variables leaked into a Slurm job).
  EXPECT_EQ(seed_with({{"PBS_JOBID", "123.server"}, {"SLURM_JOB_ID", "1000"}}), accelerate::job_seed_of("slurm:1000"));
}

TEST(SeedFromJob, NoSchedulerIsAClearErrorOrTheFallback) {
  const auto cleared = accelerate::clear_environment();
  const auto message = error_of([] { (void)accelerate::seed_from_job(); });
  EXPECT_NE(message.find("SLURM_JOB_ID"), std::string::npos) << message;
  EXPECT_NE(message.find("seed_from_job(fallback)"), std::string::npos) << message;
  EXPECT_EQ(accelerate::seed_from_job(99), 99U);
  const auto patch = accelerate::patch_environment({{"SLURM_JOB_ID", "1000"}});
  EXPECT_EQ(accelerate::seed_from_job(99), accelerate::job_seed_of("slurm:1000"));
}

// --- RNG states -----------------------------------------------------------------

TEST(RngStates, CaptureAndRestoreTorchAndGenerator) {
  at::Generator generator = at::detail::createCPUGenerator(77);
  torch::manual_seed(3);
  const auto states = accelerate::capture_rng_states(&generator);
  EXPECT_TRUE(states.cuda.empty() || torch::cuda::is_available());
  ASSERT_TRUE(states.generator.has_value());
  const auto expected = torch::randn({6});
  const auto expected_gen = torch::randn({6}, generator);
  (void)torch::randn({100});  // move on
  accelerate::restore_rng_states(states, &generator);
  EXPECT_TRUE(torch::equal(torch::randn({6}), expected));
  EXPECT_TRUE(torch::equal(torch::randn({6}, generator), expected_gen));

  // Through an IValue, as a checkpoint stores it.
  const auto round_trip = accelerate::RngStates::from_ivalue(states.to_ivalue());
  accelerate::restore_rng_states(round_trip, &generator);
  EXPECT_TRUE(torch::equal(torch::randn({6}), expected));
  EXPECT_TRUE(torch::equal(torch::randn({6}, generator), expected_gen));
  EXPECT_TRUE(states.to_ivalue().toGenericDict().contains("torch_manual_seed"));
}

TEST(RngStates, BadInput) {
  auto states = accelerate::capture_rng_states();
  EXPECT_FALSE(states.generator.has_value());
  at::Generator generator = at::detail::createCPUGenerator(1);
  auto with_generator = accelerate::capture_rng_states(&generator);
  EXPECT_NE(error_of([&] { accelerate::restore_rng_states(with_generator); }).find("no generator was passed"),
            std::string::npos);
  auto truncated = states;
  truncated.torch = states.torch.slice(0, 0, 10).clone();
  EXPECT_NE(error_of([&] { accelerate::restore_rng_states(truncated); }).find("does not fit"), std::string::npos);
  if (!torch::cuda::is_available()) {
    auto with_gpu = states;
    with_gpu.cuda.push_back(torch::zeros({16}, torch::kByte));
    EXPECT_NE(error_of([&] { accelerate::restore_rng_states(with_gpu); }).find("0 GPU(s) are visible"),
              std::string::npos);
  }
  EXPECT_NE(error_of([] { (void)accelerate::RngStates::from_ivalue(c10::IValue(3)); }).find("expected a dict"),
            std::string::npos);
}

TEST(RngTypes, Parse) {
  EXPECT_EQ(accelerate::parse_rng_type("torch"), accelerate::RngType::Torch);
  EXPECT_EQ(accelerate::parse_rng_type("cuda"), accelerate::RngType::Cuda);
  EXPECT_EQ(accelerate::parse_rng_type("generator"), accelerate::RngType::Generator);
  const auto message = error_of([] { (void)accelerate::parse_rng_type("numpy"); });
  EXPECT_NE(message.find("'numpy'"), std::string::npos) << message;
  EXPECT_NE(message.find("\"torch\", \"cuda\", \"generator\""), std::string::npos) << message;
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
