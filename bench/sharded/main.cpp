// bench_sharded: memory and samples/s of ZeRO sharding (ShardedOptimizer,
// stages 1 and 2; FullyShardedModel, stage 3) against DDP (DistributedModel
// with the whole optimizer) on an MLP trained with Adam. Started with mpirun; rank 0 prints one JSON
// object per run. run.sh runs every mode and PyTorch's Python peers.
//
//   bench_sharded --mode ddp|stage1|stage2|stage3 [--width 4096] [--layers 6]
//                 [--batch 16] [--steps 5] [--warmup 1] [--bucket-cap-mb 25]
#include <CLI/CLI.hpp>
#include <ATen/Parallel.h>
#include <mpi.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <accelerate/comm/process_group.hpp>
#include <accelerate/runtime/state.hpp>
#include <accelerate/training/distributed_model.hpp>
#include <accelerate/training/fully_sharded_model.hpp>
#include <accelerate/training/sharded_optimizer.hpp>
#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "accelerate/runtime/mpi_comm.hpp"
#include "system_info.hpp"

namespace {

struct Args {
  std::string mode = "ddp";
  std::int64_t width = 4096;
  int layers = 6;
  std::int64_t batch = 16;
  int steps = 5;
  int warmup = 1;
  double bucket_cap_mb = 25;
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app("ZeRO sharding against DDP: peak memory and samples/s on an MLP with Adam.", "bench_sharded");
  app.add_option("--mode", a.mode, "ddp, stage1, stage2 or stage3")
      ->capture_default_str()
      ->check(CLI::IsMember({"ddp", "stage1", "stage2", "stage3"}));
  app.add_option("--width", a.width, "features of every layer")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--layers", a.layers, "Linear(width, width) layers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", a.batch, "samples per rank")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--steps", a.steps, "timed steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", a.warmup, "untimed steps first")->capture_default_str();
  app.add_option("--bucket-cap-mb", a.bucket_cap_mb, "DDP and ZeRO bucket size")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::exit(app.exit(error) == 0 ? 0 : 2);
  }
  return a;
}

double max_over_ranks(double value, MPI_Comm comm) {
  MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, comm);
  return value;
}

// Bytes of the tensors in the optimizer's per-parameter state (Adam's moments).
double optimizer_state_bytes(torch::optim::Optimizer& optimizer) {
  double bytes = 0;
  for (const auto& [key, state] : optimizer.state()) {
    const auto& adam = static_cast<const torch::optim::AdamParamState&>(*state);
    bytes += static_cast<double>(adam.exp_avg().nbytes() + adam.exp_avg_sq().nbytes());
  }
  return bytes;
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

  // The whole gradients held while backward runs, sampled as the gradient
  // reaches each layer's input: the parameters' .grad (DDP's buckets through
  // the .grad views) and stage 2's bucket inputs not yet reduced.
  double gradient_bytes_in_backward = 0;
  std::function<void()> sample_gradients;
  const auto relu_sampled = [&](const torch::Tensor& h) {
    torch::Tensor r = torch::relu(h);
    if (r.requires_grad()) r.register_hook([&](const torch::Tensor&) { sample_gradients(); });
    return r;
  };

  torch::manual_seed(1);
  auto net = std::make_shared<torch::nn::SequentialImpl>();
  std::vector<torch::nn::Linear> layers;
  for (int l = 0; l < args.layers; ++l) {
    layers.emplace_back(args.width, args.width);
    net->push_back(layers.back());
    if (l + 1 < args.layers) net->push_back(torch::nn::Functional(relu_sampled));
  }
  std::int64_t parameters = 0;
  for (const auto& p : net->parameters()) parameters += p.numel();
  // Stage 3 shards the parameters first; the optimizer is built over the shards.
  std::unique_ptr<accelerate::FullyShardedModel> fully_sharded;
  if (args.mode == "stage3") fully_sharded = std::make_unique<accelerate::FullyShardedModel>(torch::nn::Sequential(net), *group);
  torch::optim::Adam adam(fully_sharded ? fully_sharded->parameters() : net->parameters(),
                          torch::optim::AdamOptions(1e-4));
  std::unique_ptr<accelerate::DistributedModel> ddp;
  std::unique_ptr<accelerate::ShardedOptimizer> sharded;
  if (args.mode == "ddp" || args.mode == "stage1") {
    ddp = std::make_unique<accelerate::DistributedModel>(
        net, *group,
        accelerate::DistributedDataParallelKwargs{.bucket_cap_mb = args.bucket_cap_mb,
                                                  .gradient_as_bucket_view = true});
  }
  if (args.mode == "stage1" || args.mode == "stage2") {
    sharded = std::make_unique<accelerate::ShardedOptimizer>(
        adam, *group,
        accelerate::ShardingOptions{.stage = args.mode == "stage1" ? accelerate::ZeroStage::OptimizerState
                                                                   : accelerate::ZeroStage::Gradients,
                                    .bucket_cap_mb = args.bucket_cap_mb});
  }
  torch::manual_seed(100 + rank);
  const auto x = torch::randn({args.batch, args.width});
  const auto y = torch::randn({args.batch, args.width});
  double gradient_bytes_after_step = 0;
  sample_gradients = [&] {
    double bytes = sharded ? static_cast<double>(sharded->bucket_input_bytes()) : 0.0;
    for (const auto& p : net->parameters()) {
      if (p.grad().defined()) bytes += static_cast<double>(p.grad().nbytes());
    }
    gradient_bytes_in_backward = std::max(gradient_bytes_in_backward, bytes);
  };
  auto step = [&] {
    if (ddp) ddp->prepare_forward();
    auto loss = torch::mse_loss(fully_sharded ? fully_sharded->forward(x) : net->forward(x), y);
    loss.backward();
    sample_gradients();
    if (sharded) {
      sharded->step();
    } else {
      adam.step();
    }
    gradient_bytes_after_step = 0;
    for (const auto& p : net->parameters()) {
      if (p.grad().defined()) gradient_bytes_after_step += static_cast<double>(p.grad().nbytes());
    }
    if (sharded) {
      sharded->zero_grad();
    } else {
      adam.zero_grad();
    }
    return loss;
  };
  for (int i = 0; i < args.warmup; ++i) step();
  MPI_Barrier(state.world_comm());
  const auto start = std::chrono::steady_clock::now();
  torch::Tensor last;
  for (int i = 0; i < args.steps; ++i) last = step();
  const double elapsed = max_over_ranks(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                                        state.world_comm());
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double peak_rss = max_over_ranks(static_cast<double>(usage.ru_maxrss) * 1024.0, state.world_comm());
  const double state_bytes = max_over_ranks(optimizer_state_bytes(adam), state.world_comm());
  const double gradient_bytes = max_over_ranks(gradient_bytes_after_step, state.world_comm());
  const double gradient_peak = max_over_ranks(gradient_bytes_in_backward, state.world_comm());
  // Parameters held between steps: the shards under stage 3, else the whole model.
  double held = 0;
  if (fully_sharded) {
    held = static_cast<double>(fully_sharded->shard_elements()) * 4 +
           static_cast<double>(fully_sharded->whole_parameter_bytes());
  } else {
    for (const auto& p : net->parameters()) held += static_cast<double>(p.nbytes());
  }
  const double parameter_bytes = max_over_ranks(held, state.world_comm());

  if (rank == 0) {
    std::ostringstream out;
    out.precision(6);
    out << "{\"impl\":\"ours\",\"mode\":\"" << args.mode << "\",\"ranks\":" << ranks << ",\"parameters\":" << parameters
        << ",\"batch_per_rank\":" << args.batch << ",\"steps\":" << args.steps << ",\"seconds\":" << elapsed
        << ",\"samples_per_s\":" << static_cast<double>(args.steps * args.batch * ranks) / elapsed
        << ",\"peak_rss_mb\":" << peak_rss / 1e6 << ",\"parameter_mb\":" << parameter_bytes / 1e6 << ",\"optimizer_state_mb\":" << state_bytes / 1e6
        << ",\"gradient_mb_after_step\":" << gradient_bytes / 1e6
        << ",\"gradient_mb_in_backward\":" << gradient_peak / 1e6 << ",\"final_loss\":" << last.item<double>();
    for (const auto& [key, value] : system.entries) out << ",\"system " << key << "\":\"" << value << "\"";
    out << "}";
    std::cout << out.str() << std::endl;
  }
  return 0;
}
