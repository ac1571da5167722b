#include "train_options.hpp"

#include <CLI/CLI.hpp>

#include <limits>

#include <cstdlib>

TrainOptions parse_train_options(int argc, char** argv) {
  TrainOptions options;
  CLI::App app(
      "Trains a classifier on a synthetic, learnable task with the Accelerator, on as many processes as the "
      "launcher (mpirun, srun) starts. Values follow their option as \"--epochs 3\" or \"--epochs=3\".",
      "train");
  app.add_option("--epochs", options.epochs, "passes over the training set")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--batch-size", options.batch_size, "samples per process and micro-step")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--lr", options.lr, "SGD learning rate")->capture_default_str()->check([](const std::string& value) {
        try {
          return std::stod(value) > 0 ? std::string() : std::string("must be positive");
        } catch (const std::exception&) {
          return "'" + value + "' is not a number";
        }
      });
  app.add_option_function<std::uint64_t>(
      "--seed", [&](const std::uint64_t& seed) { options.seed = seed; },
      "seed (default: derived from the batch job id, else 42)");
  // Checked by the Accelerator, which names the setting on every rank.
  app.add_option_function<std::string>(
      "--mixed-precision", [&](const std::string& mode) { options.mixed_precision = mode; },
      "no, bf16 or fp16 (default: ACCELERATE_MIXED_PRECISION, the config file, no)");
  app.add_option_function<int>(
         "--gradient-accumulation-steps", [&](const int& steps) { options.gradient_accumulation_steps = steps; },
         "micro-steps per optimizer step")
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--project-dir", options.project_dir, "checkpoints go to DIR/checkpoints")->capture_default_str();
  app.add_option("--checkpoint-every", options.checkpoint_every, "save every N optimizer steps (0 = never)")
      ->capture_default_str()
      ->check(CLI::Range(0LL, std::numeric_limits<long long>::max()));
  app.add_option("--total-limit", options.total_limit, "keep at most N checkpoints")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_flag("--resume", options.resume, "continue from the newest checkpoint, if any");
  app.add_flag("--async-save", options.async_save,
               "write checkpoints on a thread of their own while training goes on (MPI_THREAD_MULTIPLE)");
  app.add_option("--max-steps", options.max_steps, "stop after N optimizer steps in total (-1: no limit)")
      ->capture_default_str();
  app.add_option("--profile-steps", options.profile_steps,
                 "profile N optimizer steps after one warm-up step; Chrome traces in DIR/profile (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  app.footer(
      "On SIGUSR1 or SIGTERM every rank stops after the current step, a checkpoint is committed, and the "
      "program exits with 75 so that the job script can requeue it.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help exits 0; a usage error exits 2 on every rank, before MPI starts.
    const int code = app.exit(error);
    std::exit(code == 0 ? 0 : 2);
  }
  return options;
}
