// A Kokkos simulation coupled to a LibTorch surrogate, across ranks.
//
// The simulation: the 1-D heat equation on a periodic rod, explicit
// three-point stencil, each rank owning a slab of cells in a Kokkos::View
// with one ghost cell per side, halos exchanged with MPI. Every few steps the
// ranks train a small surrogate — a model of one stencil update, from the
// three neighbouring temperatures to the next temperature — on the fields
// their slabs just produced, through the Accelerator (gradients averaged over
// all ranks). The field is read as a tensor without a copy. Checkpoints hold
// the simulation (each rank's slab, the step) and the surrogate (model,
// optimizer, RNG) in one HDF5 file; --resume continues from the newest.
//
// usage: kokkos_coupling [--steps N] [--cells-per-rank N] [--train-every K]
//                        [--checkpoint-every C] [--stop-after S]
//                        [--project-dir DIR] [--resume]
#include <CLI/CLI.hpp>

#include <limits>
#include <mpi.h>
#include <torch/torch.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "accelerate/interop/kokkos.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/training/accelerator.hpp"

namespace {

using Field = Kokkos::View<double*, Kokkos::LayoutRight, Kokkos::HostSpace>;
constexpr double kDiffusion = 0.2;  // D·dt/dx², stable below 0.5

struct Options {
  int steps = 60;
  int cells_per_rank = 64;
  int train_every = 2;
  int checkpoint_every = 0;
  int stop_after = -1;
  std::string project_dir = "kokkos-coupling-output";
  bool resume = false;
};

Options parse(int argc, char** argv) {
  Options options;
  CLI::App app("A Kokkos stencil code coupled to a LibTorch model trained through the Accelerator.", "kokkos_coupling");
  app.add_option("--steps", options.steps, "simulation steps")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--cells-per-rank", options.cells_per_rank, "cells of the 1-D domain per rank (at least 3)")
      ->capture_default_str()
      ->check(CLI::Range(3, 1 << 30));
  app.add_option("--train-every", options.train_every, "simulation steps per training step")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--checkpoint-every", options.checkpoint_every, "save every N steps (0 = never)")
      ->capture_default_str();
  app.add_option("--stop-after", options.stop_after, "stop after N steps (-1: run to the end)")->capture_default_str();
  app.add_option("--project-dir", options.project_dir, "checkpoints go to DIR/checkpoints")->capture_default_str();
  app.add_flag("--resume", options.resume, "continue from the newest checkpoint, if any");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);  // --help: 0; a usage error: 2, on every rank
    std::exit(code == 0 ? 0 : 2);
  }
  return options;
}

// One rank's slab: cells 1..n, ghosts 0 and n+1.
class HeatSlab {
 public:
  HeatSlab(const accelerate::State& state, int cells)
      : comm_(state.world_comm()),
        rank_(state.process_index()),
        size_(state.num_processes()),
        cells_(cells),
        field_("temperature", cells + 2),
        next_("temperature_next", cells + 2) {
    const double total = static_cast<double>(cells) * size_;
    const int offset = rank_ * cells;
    Field field = field_;
    Kokkos::parallel_for(
        "initial", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(1, cells + 1), KOKKOS_LAMBDA(int i) {
          const double x = (offset + i - 1) / total;
          field(i) = std::sin(2 * M_PI * x) + 0.5 * std::sin(6 * M_PI * x);
        });
    exchange_halos();
  }

  // One explicit step: next = field + D (left - 2 field + right); then field = next.
  void step() {
    Field field = field_;
    Field next = next_;
    Kokkos::parallel_for(
        "stencil", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(1, cells_ + 1),
        KOKKOS_LAMBDA(int i) { next(i) = field(i) + kDiffusion * (field(i - 1) - 2 * field(i) + field(i + 1)); });
    Kokkos::fence();
    // Copy, not swap: the checkpoint holds a handle to field_'s allocation.
    Kokkos::deep_copy(Kokkos::subview(field_, std::pair(1, cells_ + 1)),
                      Kokkos::subview(next_, std::pair(1, cells_ + 1)));
    exchange_halos();
  }

  // Periodic halo exchange with the neighbouring slabs.
  void exchange_halos() {
    const int left = (rank_ + size_ - 1) % size_;
    const int right = (rank_ + 1) % size_;
    double* data = field_.data();
    MPI_Sendrecv(&data[cells_], 1, MPI_DOUBLE, right, 0, &data[0], 1, MPI_DOUBLE, left, 0, comm_, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&data[1], 1, MPI_DOUBLE, left, 1, &data[cells_ + 1], 1, MPI_DOUBLE, right, 1, comm_,
                 MPI_STATUS_IGNORE);
  }

  // Surrogate training pairs of this slab: windows (left, centre, right) -> next centre.
  [[nodiscard]] std::pair<torch::Tensor, torch::Tensor> samples() const {
    const torch::Tensor field = accelerate::kokkos::to_tensor(field_);      // shares the view's memory
    const torch::Tensor windows = field.unfold(0, 3, 1).to(torch::kFloat);  // [cells, 3], a copy in fp32
    const torch::Tensor centre = windows.select(1, 1);
    const torch::Tensor target = centre + kDiffusion * (windows.select(1, 0) - 2 * centre + windows.select(1, 2));
    return {windows, target.unsqueeze(1)};
  }

  [[nodiscard]] const Field& field() const noexcept { return field_; }

  // Sum of the temperatures over all ranks (a compact fingerprint of the state).
  [[nodiscard]] double global_sum() const {
    double local = 0;
    Field field = field_;
    Kokkos::parallel_reduce(
        "sum", Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(1, cells_ + 1),
        KOKKOS_LAMBDA(int i, double& acc) { acc += field(i) * field(i); }, local);
    double total = 0;
    MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, comm_);
    return total;
  }

 private:
  MPI_Comm comm_;
  int rank_;
  int size_;
  int cells_;
  Field field_;
  Field next_;
};

struct SurrogateImpl : torch::nn::Module {
  SurrogateImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(3, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(torch::tanh(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Surrogate);

std::string format(double value) {
  std::ostringstream out;
  out << std::setprecision(10) << value;
  return out.str();
}

int run(const Options& options) {
  // Order: MPI (the Accelerator's State), then Kokkos; the reverse at the end.
  accelerate::Accelerator accelerator(
      {.project_config = {.project_dir = options.project_dir, .automatic_checkpoint_naming = true, .total_limit = 2}});
  accelerate::kokkos::KokkosRuntime kokkos(accelerator.state());
  {
    HeatSlab slab(accelerator.state(), options.cells_per_rank);
    torch::manual_seed(11);
    Surrogate surrogate;
    torch::optim::Adam adam(surrogate->parameters(), torch::optim::AdamOptions(0.01));
    auto [model, optimizer] = accelerator.prepare(surrogate, adam);

    // The simulation's state goes into the same checkpoint as the model.
    torch::Tensor sim_step = torch::zeros({}, torch::kLong);
    accelerator.register_for_checkpointing(
        accelerate::kokkos::checkpoint_state(slab.field(), accelerate::kokkos::Distribution::PerRank));
    accelerator.register_for_checkpointing(
        accelerate::checkpoint::TensorState{[&] {
                                              return std::map<std::string, at::Tensor>{{"sim_step", sim_step}};
                                            },
                                            [&](const std::map<std::string, at::Tensor>& saved) {
                                              sim_step.copy_(saved.at("sim_step"));
                                            }});

    if (options.resume) {
      if (const auto latest = accelerator.latest_checkpoint()) {
        accelerator.load_state(*latest);
        slab.exchange_halos();
        accelerator.print("kokkos-coupling: resumed from " + latest->string() + " at sim step " +
                          std::to_string(sim_step.item<int64_t>()));
      }
    }
    accelerator.print("kokkos-coupling: " + std::to_string(accelerator.num_processes()) + " rank(s) x " +
                      std::to_string(options.cells_per_rank) + " cells, " + std::to_string(options.steps) +
                      " steps, Kokkos " + Kokkos::DefaultHostExecutionSpace::name());

    double loss_value = 0;
    while (sim_step.item<int64_t>() < options.steps) {
      slab.step();
      sim_step += 1;
      const int64_t step = sim_step.item<int64_t>();
      if (step % options.train_every == 0) {
        const auto [inputs, targets] = slab.samples();
        optimizer->zero_grad();
        const torch::Tensor loss = torch::mse_loss(model(inputs), targets);
        accelerator.backward(loss);
        optimizer->step();
        loss_value = accelerator.reduce(loss.detach()).item<double>();
        if (step % (options.train_every * 10) == 0) {
          accelerator.print("kokkos-coupling: sim step " + std::to_string(step) + " surrogate loss " +
                            format(loss_value));
        }
      }
      if (options.checkpoint_every > 0 && step % options.checkpoint_every == 0) {
        accelerator.print("kokkos-coupling: checkpoint " + accelerator.save_state().string() + " at sim step " +
                          std::to_string(step));
      }
      if (options.stop_after >= 0 && step >= options.stop_after) {
        accelerator.print("kokkos-coupling: stopped at sim step " + std::to_string(step));
        accelerator.free_memory();
        return 0;
      }
    }
    // How well the surrogate predicts the next field from the current one.
    const auto [inputs, targets] = slab.samples();
    torch::Tensor error;
    {
      torch::NoGradGuard no_grad;
      error = (surrogate->forward(inputs) - targets).pow(2).mean();
    }
    accelerator.print("kokkos-coupling: final sim step " + std::to_string(sim_step.item<int64_t>()) + " field energy " +
                      format(slab.global_sum()) + " surrogate loss " + format(loss_value) + " error " +
                      format(accelerator.reduce(error).item<double>()));
    accelerator.free_memory();  // registered views go before Kokkos is finalised
  }
  accelerator.print("kokkos-coupling: done");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    accelerate::abort_all(std::string("kokkos_coupling: ") + error.what());
  }
}
