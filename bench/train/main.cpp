// bench_train: samples/s of data-parallel training through DistributedModel
// ("ours") and of the same per-rank compute with no communication at all
// ("ceiling"). Started with mpirun; rank 0 prints one JSON object per run.
// A third mode, "synced_ceiling", is the ceiling with one barrier after each
// step: what a synchronous job pays for its ranks waiting on one another,
// with no data moved. run.sh runs all three, plus PyTorch's Python DDP
// (ddp_peer.py), and reports.
//
//   bench_train --workload W1|W2|GPT --mode ours|ceiling|synced_ceiling [--steps N] [--warmup N]
//               [--batch 64] [--bucket-cap-mb 25] [--first-bucket-mb 1]
//               [--bucket-view 0|1] [--progress 0|1]
//               [--comm-hook no|fp16|bf16|power_sgd|batched_power_sgd] [--power-sgd-rank 1]
//               [--mixed-precision no|bf16]
#include <CLI/CLI.hpp>

#include <limits>
#include <ATen/Parallel.h>
#include <mpi.h>
#include <torch/torch.h>

#include <accelerate/amp/autocast.hpp>
#include <accelerate/comm/process_group.hpp>
#include <accelerate/runtime/state.hpp>
#include <accelerate/training/distributed_model.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "accelerate/runtime/mpi_comm.hpp"
#include "system_info.hpp"
#include "workloads.hpp"

namespace {

struct Args {
  std::string workload = "W1";
  std::string mode = "ours";
  int steps = 0;  // 0: per-workload default
  int warmup = -1;  // -1: per-workload default
  int64_t batch = 64;
  // The library's defaults, so that the benchmark measures what prepare() gives.
  double bucket_cap_mb = accelerate::DistributedDataParallelKwargs{}.bucket_cap_mb;
  double first_bucket_mb = accelerate::DistributedModelOptions{}.first_bucket_cap_mb;
  bool bucket_view = accelerate::DistributedDataParallelKwargs{}.gradient_as_bucket_view;
  bool progress = accelerate::DistributedModelOptions{}.progress_in_hooks;
  std::string comm_hook = "no";
  int power_sgd_rank = 1;
  std::string mixed_precision = "no";
};

accelerate::DDPCommunicationHookType hook_named(const std::string& name) {
  using accelerate::DDPCommunicationHookType;
  for (auto hook : {DDPCommunicationHookType::NO, DDPCommunicationHookType::FP16, DDPCommunicationHookType::BF16,
                    DDPCommunicationHookType::POWER_SGD, DDPCommunicationHookType::BATCHED_POWER_SGD}) {
    if (accelerate::to_string(hook) == name) return hook;
  }
  return DDPCommunicationHookType::NO;
}

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app("Data-parallel training throughput: DistributedModel against the no-communication ceiling.",
               "bench_train");
  app.add_option("--workload", a.workload, "W1 (MLP), W2 (CNN) or GPT (jobs/gpt's transformer, AdamW)")
      ->capture_default_str()
      ->check(CLI::IsMember({"W1", "W2", "GPT"}));
  app.add_option("--mixed-precision", a.mixed_precision, "no, or bf16 (forward and loss under CPU autocast)")
      ->capture_default_str()
      ->check(CLI::IsMember({"no", "bf16"}));
  app.add_option("--mode", a.mode, "ours, ceiling, or synced_ceiling (a barrier after each step)")
      ->capture_default_str()
      ->check(CLI::IsMember({"ours", "ceiling", "synced_ceiling"}));
  app.add_option("--steps", a.steps, "timed steps (0: 200 for W1, 30 for W2, 10 for GPT)")->capture_default_str();
  app.add_option("--warmup", a.warmup, "untimed steps first")->capture_default_str();
  app.add_option("--batch", a.batch, "samples per rank")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--bucket-cap-mb", a.bucket_cap_mb, "gradient bucket size")->capture_default_str();
  app.add_option("--first-bucket-mb", a.first_bucket_mb, "first bucket size")->capture_default_str();
  app.add_option("--bucket-view", a.bucket_view, "gradient_as_bucket_view (0 or 1)")->capture_default_str();
  app.add_option("--progress", a.progress, "progress MPI inside the gradient hooks (0 or 1)")->capture_default_str();
  app.add_option("--comm-hook", a.comm_hook, "gradient compression (PowerSGD compresses from the first step)")
      ->capture_default_str()
      ->check(CLI::IsMember({"no", "fp16", "bf16", "power_sgd", "batched_power_sgd"}));
  app.add_option("--power-sgd-rank", a.power_sgd_rank, "PowerSGD's matrix_approximation_rank")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::exit(app.exit(error) == 0 ? 0 : 2);
  }
  if (a.steps == 0) a.steps = a.workload == "W1" ? 200 : a.workload == "W2" ? 30 : 10;
  if (a.warmup < 0) a.warmup = a.workload == "GPT" ? 2 : 10;
  return a;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  at::set_num_threads(1);
  accelerate::State state;
  auto group = accelerate::ProcessGroup::world(state);
  const int rank = group->rank();
  const int ranks = group->size();
  const auto system = bench::collect_system_info(state.world_comm());

  auto w = bench::make_workload(args.workload, args.batch, 1000 + rank);
  std::unique_ptr<accelerate::DistributedModel> model;
  if (args.mode == "ours") {
    accelerate::DistributedDataParallelKwargs kwargs{.bucket_cap_mb = args.bucket_cap_mb,
                                                     .gradient_as_bucket_view = args.bucket_view,
                                                     .comm_hook = hook_named(args.comm_hook)};
    if (args.comm_hook.find("power_sgd") != std::string::npos) {
      kwargs.comm_state_option = {{"matrix_approximation_rank", std::to_string(args.power_sgd_rank)},
                                  {"start_powerSGD_iter", "0"}};
    }
    model = std::make_unique<accelerate::DistributedModel>(w.model, *group, kwargs,
                                                           accelerate::DistributedModelOptions{.first_bucket_cap_mb =
                                                                                                   args.first_bucket_mb,
                                                                                               .progress_in_hooks =
                                                                                                   args.progress});
  } else if (args.mode != "ceiling" && args.mode != "synced_ceiling") {
    if (rank == 0) std::cerr << "bench_train: --mode must be ours, ceiling or synced_ceiling\n";
    return 2;
  }
  const bool barrier_per_step = args.mode == "synced_ceiling";
  const std::unique_ptr<torch::optim::Optimizer> optimizer = w.make_optimizer();
  const bool bf16 = args.mixed_precision == "bf16";

  auto step = [&](int i) {
    const auto k = static_cast<std::size_t>(i) % w.inputs.size();
    optimizer->zero_grad();
    if (model) model->prepare_forward();
    torch::Tensor loss;
    {
      std::optional<accelerate::AutocastGuard> autocast;
      if (bf16) autocast.emplace(c10::DeviceType::CPU, c10::ScalarType::BFloat16);
      loss = w.loss(w.forward(w.inputs[k]), w.targets[k]);
    }
    loss.backward();
    optimizer->step();
    if (barrier_per_step) MPI_Barrier(state.world_comm());
    return loss;
  };
  for (int i = 0; i < args.warmup; ++i) step(i);
  if (model) model->reset_counters();
  MPI_Barrier(state.world_comm());
  const auto start = std::chrono::steady_clock::now();
  torch::Tensor last;
  for (int i = 0; i < args.steps; ++i) last = step(i);
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, state.world_comm());

  if (rank == 0) {
    const double samples = static_cast<double>(args.steps) * static_cast<double>(args.batch) * ranks;
    std::ostringstream out;
    out.precision(6);
    out << "{\"impl\":\"" << args.mode << "\",\"workload\":\"" << args.workload << (bf16 ? "-bf16" : "")
        << "\",\"ranks\":" << ranks
        << ",\"batch_per_rank\":" << args.batch << ",\"steps\":" << args.steps << ",\"seconds\":" << elapsed
        << ",\"samples_per_s\":" << samples / elapsed << ",\"step_ms\":" << 1e3 * elapsed / args.steps
        << ",\"final_loss\":" << last.item<double>() << ",\"threads\":" << at::get_num_threads() << ",\"blas\":\""
        << json_escape(bench::loaded_blas()) << "\"";
    if (model) {
      const auto c = model->counters();
      out << ",\"bucket_cap_mb\":" << args.bucket_cap_mb << ",\"first_bucket_mb\":" << args.first_bucket_mb
          << ",\"bucket_view\":" << (args.bucket_view ? "true" : "false")
          << ",\"progress_in_hooks\":" << (args.progress ? "true" : "false") << ",\"comm_hook\":\"" << args.comm_hook
          << "\",\"power_sgd_rank\":" << args.power_sgd_rank
          << ",\"all_reduces_per_step\":" << static_cast<double>(c.all_reduces) / args.steps
          << ",\"mb_per_step\":" << static_cast<double>(c.bytes_all_reduced) / args.steps / 1e6
          << ",\"finalize_wait_ms\":" << 1e3 * c.finalize_wait_seconds / args.steps << ",\"buckets\":[";
      for (std::size_t b = 0; b < c.buckets.size(); ++b) {
        const auto& k = c.buckets[b];
        std::string params;
        for (auto p : k.parameters) params += (params.empty() ? "" : " ") + model->parameter_names()[p];
        out << (b ? "," : "") << "{\"parameters\":\"" << params << "\",\"mb\":" << k.bytes / 1e6
            << ",\"launched_in_backward\":" << k.launched_in_backward
            << ",\"launched_at_finalize\":" << k.launched_at_finalize
            << ",\"completed_before_wait\":" << k.completed_before_wait << "}";
      }
      out << "]";
    }
    out << "}";
    std::cout << out.str() << std::endl;
  }
  return 0;
}
