// Writes a TensorBoard run through the Accelerator with values the reader
// test knows: scalars at given steps and at default ones, text, a histogram,
// NaN, and the hyper-parameters. Every rank runs it; the tracker writes on
// the main process only.
// usage: tensorboard_job <project dir>
#include <cmath>
#include <iostream>
#include <limits>
#include <vector>

#include "accelerate/training/accelerator.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tensorboard_job <project dir>\n";
    return 2;
  }
  try {
    accelerate::Accelerator accelerator({.project_config = {.project_dir = argv[1]}, .log_with = {"tensorboard"}});
    accelerator.init_trackers("tb", {{"lr", 0.125}, {"batch_size", 32}, {"optimizer", "adam"}});
    for (int step = 0; step < 5; ++step) {
      accelerator.log({{"loss", 1.0 / (step + 1)}, {"epoch", step / 2}}, step);
    }
    // No step: the one after the last (5), then 6.
    accelerator.log({{"note", "ranks " + std::to_string(accelerator.num_processes())}});
    accelerator.log({{"loss", std::numeric_limits<double>::quiet_NaN()}});
    // 0..99 in 10 buckets of 10, with a NaN and an infinity left out.
    std::vector<double> values;
    for (int i = 0; i < 100; ++i) values.push_back(i);
    values.push_back(std::numeric_limits<double>::quiet_NaN());
    values.push_back(std::numeric_limits<double>::infinity());
    accelerator.get_tracker("tensorboard").log_histogram("weights", values, 2, 10);
    accelerator.end_training();
  } catch (const std::exception& error) {
    std::cerr << "tensorboard_job: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
