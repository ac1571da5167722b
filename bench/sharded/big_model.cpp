// bench_big_model: a model whose data-parallel training does not fit in the
// machine's memory, trained through the Accelerator with ZeRO stage 2
// (fsdp_plugin SHARD_GRAD_OP), saved, and resumed on another number of ranks
// without sharding. big_model.sh runs both phases and checks them.
//
//   mpirun -np 2 bench_big_model --phase train --width 8192 --layers 13 --checkpoint DIR
//   mpirun -np 1 bench_big_model --phase resume --strategy NO_SHARD --checkpoint DIR
//
// Every rank trains an MLP of `layers` Linear(width, width) with Adam on a
// fixed batch of its own (the loss must fall). The train phase ends by
// printing the loss of rank 0's batch under the final parameters; the resume
// phase prints the same loss right after load_state, before its own steps,
// so the two must agree. Rank 0 prints one JSON object per line.
#include <CLI/CLI.hpp>
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>
#include <torch/torch.h>

#include <accelerate/training/accelerator.hpp>
#include <accelerate/training/fully_sharded_data_parallel_plugin.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "system_info.hpp"

namespace {

struct Args {
  std::string phase = "train";
  std::string strategy = "SHARD_GRAD_OP";
  std::int64_t width = 8192;
  int layers = 13;
  std::int64_t batch = 4;
  int steps = 4;
  double lr = 1e-5;
  std::string checkpoint;
};

Args parse(int argc, char** argv) {
  Args a;
  CLI::App app("A model too big for data parallelism, trained with ZeRO stage 2, saved and resumed.",
               "bench_big_model");
  app.add_option("--phase", a.phase, "train (then save) or resume (load, then train)")
      ->capture_default_str()
      ->check(CLI::IsMember({"train", "resume"}));
  app.add_option("--strategy", a.strategy, "fsdp_plugin sharding_strategy")->capture_default_str();
  app.add_option("--width", a.width, "features of every layer")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--layers", a.layers, "Linear(width, width) layers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", a.batch, "samples per rank")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--steps", a.steps, "optimizer steps")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--lr", a.lr, "Adam's learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--checkpoint", a.checkpoint, "directory save_state writes (train) or load_state reads (resume)")
      ->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::exit(app.exit(error) == 0 ? 0 : 2);
  }
  return a;
}

struct MlpImpl : torch::nn::Module {
  MlpImpl(std::int64_t width, int count) {
    for (int l = 0; l < count; ++l) {
      layers.push_back(register_module("layer" + std::to_string(l), torch::nn::Linear(width, width)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (std::size_t l = 0; l < layers.size(); ++l) x = layers[l]->forward(l == 0 ? x : torch::tanh(x));
    return x;
  }
  std::vector<torch::nn::Linear> layers;
};

// Rank r's fixed batch, the same in both phases.
std::pair<torch::Tensor, torch::Tensor> batch_of(int rank, const Args& args) {
  torch::manual_seed(100 + rank);
  return {torch::randn({args.batch, args.width}), torch::randn({args.batch, args.width}) * 0.1};
}

// Resident bytes now (/proc/self/statm), to see where the peak falls.
double rss_bytes() {
  long pages = 0;
  long resident = 0;
  if (std::FILE* statm = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(statm, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(statm);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  accelerate::AcceleratorOptions options;
  options.fsdp_plugin = accelerate::FullyShardedDataParallelPlugin{.sharding_strategy = args.strategy};
  accelerate::Accelerator accelerator(options);
  const int rank = accelerator.process_index();
  const int ranks = accelerator.num_processes();
  const auto system = bench::collect_system_info(MPI_COMM_WORLD);
  const auto print = [&](const std::string& json) {
    if (rank == 0) std::cout << json << std::endl;
  };

  torch::manual_seed(1);
  auto net = std::make_shared<MlpImpl>(args.width, args.layers);
  std::int64_t parameters = 0;
  for (const auto& p : net->parameters()) parameters += p.numel();
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(args.lr));
  auto [model, optimizer] = accelerator.prepare(net, adam);
  const auto rss_mb = [&] { return accelerator.reduce(torch::tensor({rss_bytes() / 1e6}), "sum").item<double>(); };
  {
    std::ostringstream out;
    out << "{\"event\":\"prepared\",\"phase\":\"" << args.phase << "\",\"rss_mb_all_ranks\":" << rss_mb() << "}";
    print(out.str());
  }

  const auto started = std::chrono::steady_clock::now();
  const auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  // The loss of rank 0's batch under the current parameters, on every rank.
  const auto rank0_loss = [&] {
    torch::NoGradGuard no_grad;
    const auto [x, y] = batch_of(0, args);
    return torch::mse_loss(net->forward(x), y).item<double>();
  };
  if (args.phase == "resume") {
    accelerator.load_state(std::filesystem::path(args.checkpoint));
    std::ostringstream out;
    out.precision(9);
    out << "{\"event\":\"loaded\",\"ranks\":" << ranks << ",\"strategy\":\"" << args.strategy
        << "\",\"rank0_loss\":" << rank0_loss() << ",\"seconds\":" << seconds() << "}";
    print(out.str());
  }

  const auto [x, y] = batch_of(rank, args);
  for (int step = 0; step < args.steps; ++step) {
    auto loss = torch::mse_loss(model->forward<MlpImpl>(x), y);
    accelerator.backward(loss);
    optimizer->step();
    optimizer->zero_grad();
    const double mean_loss = accelerator.reduce(loss.detach(), "mean").item<double>();
    std::ostringstream out;
    out.precision(9);
    out << "{\"event\":\"step\",\"phase\":\"" << args.phase << "\",\"step\":" << step << ",\"loss\":" << mean_loss
        << ",\"rss_mb_all_ranks\":" << rss_mb() << ",\"seconds\":" << seconds() << "}";
    print(out.str());
  }

  double save_seconds = 0;
  if (args.phase == "train") {
    const double before = seconds();
    accelerator.save_state(std::filesystem::path(args.checkpoint));
    save_seconds = seconds() - before;
  }
  const double final_loss = rank0_loss();
  std::vector<double> peaks(static_cast<std::size_t>(ranks));
  double peak = peak_rss_bytes();
  MPI_Gather(&peak, 1, MPI_DOUBLE, peaks.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  double total = 0;
  double largest = 0;
  for (const double p : peaks) {
    total += p;
    largest = std::max(largest, p);
  }
  std::ostringstream out;
  out.precision(9);
  out << "{\"event\":\"done\",\"phase\":\"" << args.phase << "\",\"strategy\":\"" << args.strategy
      << "\",\"ranks\":" << ranks << ",\"parameters\":" << parameters << ",\"batch_per_rank\":" << args.batch
      << ",\"rank0_loss\":" << final_loss << ",\"save_seconds\":" << save_seconds
      << ",\"peak_rss_mb_largest_rank\":" << largest / 1e6 << ",\"peak_rss_mb_all_ranks\":"
      << total / 1e6
      // Data parallelism with Adam in fp32 holds, on every rank, the weights,
      // the gradients and two moments: 16 bytes per parameter before any
      // activation, workspace or runtime.
      << ",\"ddp_tensor_mb_all_ranks\":" << 16.0 * static_cast<double>(parameters) * ranks / 1e6
      << ",\"seconds\":" << seconds();
  for (const auto& [key, value] : system.entries) out << ",\"system " << key << "\":\"" << value << "\"";
  out << "}";
  print(out.str());
  return 0;
}
