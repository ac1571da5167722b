// bench_gpu_train: single-GPU training throughput (samples/s) of a C++ loop
// through the Accelerator, to set beside the same loop in Python through
// Hugging Face Accelerate (accelerate_peer.py). One JSON object per
// (workload, precision, batch) on stdout; run.sh alternates the two sides.
//
//   bench_gpu_train [--workloads W1,W2,T] [--precisions fp32,bf16]
//                   [--batches 32,64,128,256,512] [--steps 50] [--warmup 10]
//
// Both sides: AdamW (lr 1e-3, LibTorch's and PyTorch's defaults otherwise),
// cross-entropy, zero_grad to None, data already on the GPU, the time from
// the first timed step to the loss of the last one read back (which waits
// for the GPU).
#include <CLI/CLI.hpp>

#include <limits>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "accelerate/training/accelerator.hpp"
#include "models.hpp"

namespace {

struct Args {
  std::vector<std::string> workloads{"W1", "W2", "T"};
  std::vector<std::string> precisions{"fp32", "bf16"};
  std::vector<int64_t> batches{32, 64, 128, 256, 512};
  int steps = 50;
  int warmup = 10;
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app("Single-GPU training throughput through the Accelerator.", "bench_gpu_train");
  app.add_option("--workloads", a.workloads, "W1, W2, T")->delimiter(',')->capture_default_str();
  app.add_option("--precisions", a.precisions, "fp32, bf16, fp16")->delimiter(',')->capture_default_str();
  app.add_option("--batches", a.batches, "samples per step")->delimiter(',')->capture_default_str();
  app.add_option("--steps", a.steps, "timed steps")->capture_default_str()->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--warmup", a.warmup, "untimed steps first")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::exit(app.exit(error) == 0 ? 0 : 2);
  }
  return a;
}

double run_one(accelerate::Accelerator& accelerator, const std::string& workload, int64_t batch, int warmup,
               int steps) {
  auto w = bench::make_gpu_workload(workload, batch, accelerator.device());
  torch::optim::AdamW adamw(w.model->parameters(), torch::optim::AdamWOptions(1e-3));
  auto model = accelerator.prepare(w.model);
  auto optimizer = accelerator.prepare(adamw);
  auto step = [&](int i) {
    const auto index = static_cast<std::size_t>(i) % w.inputs.size();
    torch::Tensor logits;
    {
      auto autocast = accelerator.autocast();
      logits = w.forward(w.inputs[index]);
    }
    const auto loss = torch::cross_entropy_loss(logits.to(torch::kFloat), w.targets[index]);
    accelerator.backward(loss);
    optimizer->step();
    optimizer->zero_grad();
    return loss;
  };
  for (int i = 0; i < warmup; ++i) step(i);
  (void)step(0).item<float>();
  const auto start = std::chrono::steady_clock::now();
  torch::Tensor loss;
  for (int i = 0; i < steps; ++i) loss = step(i);
  (void)loss.item<float>();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  accelerator.free_memory();
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    if (!torch::cuda::is_available()) {
      std::cerr << "bench_gpu_train: no CUDA GPU visible to this LibTorch; nothing to measure\n";
      return 77;
    }
    for (const auto& precision : args.precisions) {
      accelerate::AcceleratorOptions options;
      options.mixed_precision = precision == "fp32" ? "no" : precision;
      accelerate::Accelerator accelerator(options);
      for (const auto& workload : args.workloads) {
        for (const int64_t batch : args.batches) {
          const double seconds = run_one(accelerator, workload, batch, args.warmup, args.steps);
          std::printf(
              "{\"side\": \"ours\", \"workload\": \"%s\", \"precision\": \"%s\", \"batch\": %lld, \"steps\": %d, "
              "\"seconds\": %.6f, \"samples_per_s\": %.1f, \"ms_per_step\": %.4f}\n",
              workload.c_str(), precision.c_str(), static_cast<long long>(batch), args.steps, seconds,
              static_cast<double>(batch) * args.steps / seconds, 1e3 * seconds / args.steps);
          std::fflush(stdout);
        }
      }
    }
    return 0;
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
}
