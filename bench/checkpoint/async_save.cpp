// How long save_state stops training, synchronous and asynchronous, with a
// training loop running: an MLP (width × width Linear layers, Adam) prepared
// by the Accelerator, DDP across the ranks. Per mode, `saves` saves, each
// followed by `steps` timed steps; the JSON line of rank 0 gives the medians
// (the slowest rank's value per save or step):
//   blocked_s          the save_state call
//   copy_s             a plain copy of the state's tensors into buffers made
//                      beforehand (the floor of any snapshot), this rank's bytes
//   step_s             steps with no save in flight (before the first save)
//   step_writing_s     steps started while the background write ran
//   wait_s             wait_for_save() after the steps (0: the write had ended)
// Modes sync_tiers and async_tiers add a local tier (ProjectConfiguration::
// local_dir) under the same directory: each save is written there and copied.
// dcp_peer.py measures PyTorch's dcp.async_save on the same model. See run_async.sh.
#include <CLI/CLI.hpp>
#include <mpi.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "accelerate/accelerate.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double slowest(double local) {
  double all = 0;
  MPI_Allreduce(&local, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return all;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("save_state's blocked time with a training loop running");
  std::string mode = "async";
  std::string dir = "/tmp/accelerate_bench_async";
  int width = 2048;
  int layers = 8;
  int batch = 8;
  int saves = 3;
  int steps = 8;
  app.add_option("--mode", mode, "sync or async; _tiers: two tiers, the local one under DIR/local")
      ->check(CLI::IsMember({"sync", "async", "sync_tiers", "async_tiers"}));
  app.add_option("--dir", dir, "project directory (on the file system to measure)");
  app.add_option("--width", width);
  app.add_option("--layers", layers);
  app.add_option("--batch", batch, "samples per rank and step");
  app.add_option("--saves", saves);
  app.add_option("--steps", steps, "timed steps after each save, and before the first");
  CLI11_PARSE(app, argc, argv);

  const bool async = mode.rfind("async", 0) == 0;
  const bool tiers = mode.find("_tiers") != std::string::npos;
  accelerate::AcceleratorOptions options;
  options.project_config.project_dir = dir;
  options.project_config.automatic_checkpoint_naming = true;
  options.project_config.total_limit = 1;
  options.project_config.async_save = async;
  if (tiers) options.project_config.local_dir = dir + "/local";
  options.project_config.progress.shown = false;
  accelerate::Accelerator accelerator(options);
  torch::set_num_threads(1);
  torch::manual_seed(1);
  torch::nn::Sequential net;
  for (int l = 0; l < layers; ++l) {
    net->push_back(torch::nn::Linear(width, width));
    if (l + 1 < layers) net->push_back(torch::nn::ReLU());
  }
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-4));
  auto [model, optimizer] = accelerator.prepare(net, adam);
  torch::manual_seed(100 + accelerator.process_index());
  const torch::Tensor x = torch::randn({batch, width});
  const torch::Tensor y = torch::randn({batch, width});
  auto step = [&] {
    const auto start = Clock::now();
    accelerator.backward(torch::mse_loss(model(x), y));
    optimizer->step();
    optimizer->zero_grad();
    return slowest(seconds_since(start));
  };
  for (int w = 0; w < 2; ++w) step();  // Adam's state exists from here on

  // The tensors a snapshot copies, and buffers for the plain copy.
  std::vector<torch::Tensor> state;
  for (const auto& p : net->parameters()) state.push_back(p.detach());
  for (const auto& [key, value] : adam.state()) {
    const auto& adam_state = static_cast<const torch::optim::AdamParamState&>(*value);
    state.push_back(adam_state.exp_avg());
    state.push_back(adam_state.exp_avg_sq());
  }
  std::vector<torch::Tensor> buffers;
  double state_bytes = 0;
  for (const auto& t : state) {
    buffers.push_back(torch::empty_like(t));
    state_bytes += static_cast<double>(t.nbytes());
  }

  std::vector<double> normal, copies, blocked, writing, waits;
  for (int s = 0; s < steps; ++s) normal.push_back(step());
  for (int r = 0; r < saves; ++r) {
    accelerator.wait_for_everyone();
    auto start = Clock::now();
    for (std::size_t i = 0; i < state.size(); ++i) buffers[i].copy_(state[i]);
    copies.push_back(slowest(seconds_since(start)));
    accelerator.wait_for_everyone();
    start = Clock::now();
    (void)accelerator.save_state();
    blocked.push_back(slowest(seconds_since(start)));
    for (int s = 0; s < steps; ++s) {
      int in_flight = accelerator.save_in_progress() ? 1 : 0;
      int all = 0;
      MPI_Allreduce(&in_flight, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      const double t = step();
      if (all != 0) writing.push_back(t);
    }
    start = Clock::now();
    (void)accelerator.wait_for_save();
    waits.push_back(slowest(seconds_since(start)));
  }
  accelerator.end_training();
  if (accelerator.is_main_process()) {
    std::printf(
        "{\"impl\": \"ours\", \"mode\": \"%s\", \"ranks\": %d, \"state_mb_per_rank\": %.1f, \"blocked_s\": %.4f, "
        "\"copy_s\": %.4f, \"step_s\": %.4f, \"step_writing_s\": %.4f, \"steps_writing\": %zu, \"wait_s\": %.4f}\n",
        mode.c_str(), accelerator.num_processes(), state_bytes / 1e6, median(blocked), median(copies),
        median(normal), median(writing), writing.size(), median(waits));
  }
  return 0;
}
