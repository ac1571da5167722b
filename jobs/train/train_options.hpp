// Command line of the training job (jobs/train/train --help).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

struct TrainOptions {
  int epochs = 3;
  std::int64_t batch_size = 32;  // per process
  double lr = 0.05;
  std::optional<std::uint64_t> seed;  // unset: accelerate::seed_from_job(42)
  std::optional<std::string> mixed_precision;
  std::optional<int> gradient_accumulation_steps;
  std::string project_dir = "train-output";
  std::int64_t checkpoint_every = 0;  // optimizer steps; 0 = never
  int total_limit = 2;
  bool resume = false;
  bool async_save = false;  // save_state returns once the state is copied; the write runs beside training
  std::int64_t max_steps = -1;  // -1 = no limit
  int profile_steps = 0;        // optimizer steps to profile after one warm-up step; 0 = off
};

/// Parses argv; prints usage and exits 0 for --help, exits 2 on a bad option.
TrainOptions parse_train_options(int argc, char** argv);
