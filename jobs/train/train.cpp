// The main job: a classifier trained data-parallel through the Accelerator on
// a synthetic task generated in-process (10 Gaussian clusters in 20
// dimensions), evaluated with gather_for_metrics. The same program runs as a
// single process, under mpirun and under srun; it checkpoints, resumes and
// stops cleanly for a requeue (exit 75) when the scheduler signals.
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "accelerate/config.hpp"
#include "accelerate/runtime/env_config.hpp"
#include "accelerate/runtime/preemption.hpp"
#include "accelerate/runtime/progress.hpp"
#include "accelerate/random/seed.hpp"
#include "accelerate/training/accelerator.hpp"
#include "train_options.hpp"

namespace {

constexpr int64_t kFeatures = 20;
constexpr int64_t kClasses = 10;
constexpr int64_t kTrainSamples = 8192;
constexpr int64_t kEvalSamples = 1001;  // not a multiple of any batch: gather_for_metrics drops the padding

// Samples around 10 fixed centres. The data does not depend on the training
// seed, so every run (and every rank) sees the same task.
class ClusterDataset : public torch::data::datasets::Dataset<ClusterDataset> {
 public:
  ClusterDataset(int64_t samples, std::uint64_t data_seed) {
    torch::manual_seed(2024);
    const auto centres = torch::randn({kClasses, kFeatures}) * 0.8;
    torch::manual_seed(data_seed);
    labels_ = torch::randint(kClasses, {samples}, torch::kLong);
    inputs_ = centres.index_select(0, labels_) + torch::randn({samples, kFeatures});
  }
  torch::data::Example<> get(size_t i) override { return {inputs_[i], labels_[i]}; }
  torch::optional<size_t> size() const override { return static_cast<size_t>(labels_.size(0)); }

 private:
  torch::Tensor inputs_, labels_;
};

struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(kFeatures, 64));
    fc2 = register_module("fc2", torch::nn::Linear(64, 64));
    fc3 = register_module("fc3", torch::nn::Linear(64, kClasses));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc3->forward(torch::relu(fc2->forward(torch::relu(fc1->forward(x)))));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Classifier);

struct Metrics {
  double loss = 0;
  double accuracy = 0;
};

// Loss and accuracy over the whole evaluation set, every sample counted once.
Metrics evaluate(accelerate::Accelerator& accelerator, Classifier& net, accelerate::DataLoader& loader) {
  torch::NoGradGuard no_grad;
  net->eval();
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t count = 0;
  for (const auto& batch : loader) {
    torch::Tensor logits;
    {
      auto autocast = accelerator.autocast();
      logits = net->forward(batch.data);
    }
    const auto losses = torch::cross_entropy_loss(logits.to(torch::kFloat), batch.target, {}, at::Reduction::None);
    const auto hits = logits.argmax(1).eq(batch.target).to(torch::kLong);
    const auto all_losses = accelerator.gather_for_metrics(losses);
    const auto all_hits = accelerator.gather_for_metrics(hits);
    loss_sum += all_losses.sum().item<double>();
    correct += all_hits.sum().item<int64_t>();
    count += all_hits.size(0);
  }
  net->train();
  if (count != kEvalSamples) {
    throw std::runtime_error("evaluation saw " + std::to_string(count) + " samples instead of " +
                             std::to_string(kEvalSamples));
  }
  return {loss_sum / static_cast<double>(count), static_cast<double>(correct) / static_cast<double>(count)};
}

// A progress bar on a terminal, a line every 10 s in a batch log (main process
// only). Launchers hand ranks a pseudo-terminal even when their own output
// goes to a file, so the bar is drawn only for a program started directly.
accelerate::ProgressOptions progress_options(const accelerate::Accelerator& accelerator) {
  const bool terminal =
      isatty(STDOUT_FILENO) == 1 && accelerator.state().launcher().kind == accelerate::LauncherKind::None;
  return {.shown = accelerator.is_main_process(),
          .style = terminal ? accelerate::ProgressStyle::Bar : accelerate::ProgressStyle::Lines,
          .line_interval = std::chrono::seconds(10)};
}

std::string fixed(double value, int digits = 4) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

int run(const TrainOptions& options) {
  accelerate::AcceleratorOptions accelerator_options;
  accelerator_options.mixed_precision = options.mixed_precision;
  accelerator_options.gradient_accumulation_steps = options.gradient_accumulation_steps;
  accelerator_options.project_config = {.project_dir = options.project_dir,
                                        .automatic_checkpoint_naming = true,
                                        .total_limit = options.total_limit,
                                        .async_save = options.async_save};
  const std::uint64_t seed = options.seed.value_or(accelerate::seed_from_job(42));
  accelerator_options.dataloader_config.data_seed = seed;
  // Metrics to <project_dir>/train/metrics.csv, metrics.jsonl and a TensorBoard
  // event file where the build has protobuf (docs/tracking.md).
  accelerator_options.log_with = {accelerate::tracking::LoggerType::All};
  accelerate::Accelerator accelerator(accelerator_options);
  accelerator.init_trackers("train",
                            {{"lr", options.lr},
                             {"batch_size", options.batch_size},
                             {"epochs", options.epochs},
                             {"gradient_accumulation_steps", accelerator.gradient_accumulation_steps()},
                             {"mixed_precision", std::string(accelerate::to_string(accelerator.mixed_precision()))},
                             {"seed", static_cast<std::int64_t>(seed)}});
  accelerate::PreemptionWatcher preemption(accelerate::EnvConfig::from_environment().preemption_signals.value_or(
      accelerate::PreemptionWatcher::default_signals()));

  accelerate::set_seed(seed);
  Classifier net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(options.lr).momentum(0.9));
  torch::optim::StepLR schedule(sgd, /*step_size=*/100, /*gamma=*/0.7);
  auto [model, optimizer, scheduler, train_loader, eval_loader] =
      accelerator.prepare(net, sgd, schedule,
                          accelerate::data_loader(ClusterDataset(kTrainSamples, 1),
                                                  {.batch_size = options.batch_size, .shuffle = true}),
                          accelerate::data_loader(ClusterDataset(kEvalSamples, 2), {.batch_size = options.batch_size}));

  accelerator.print("train: " + std::to_string(accelerator.num_processes()) + " process(es), device " +
                    accelerator.state().device().str() + ", mixed precision " +
                    std::string(accelerate::to_string(accelerator.mixed_precision())) + ", global batch " +
                    std::to_string(train_loader->total_batch_size() * accelerator.gradient_accumulation_steps()) +
                    ", seed " + std::to_string(seed));
  if (options.resume) {
    if (const auto latest = accelerator.latest_checkpoint()) {
      accelerator.load_state(*latest);
      accelerator.print("train: resumed from " + latest->string() + " at step " + std::to_string(accelerator.step()));
    } else {
      accelerator.print("train: no checkpoint under " + options.project_dir + "/checkpoints; starting afresh");
    }
  }
  const Metrics before = evaluate(accelerator, net, *eval_loader);
  accelerator.print("train: eval before training loss " + fixed(before.loss) + " accuracy " + fixed(before.accuracy));

  const int64_t micro_steps_per_epoch = static_cast<int64_t>(kTrainSamples) / train_loader->total_batch_size();
  const accelerate::ProgressOptions shown_progress = progress_options(accelerator);
  const bool on_terminal = shown_progress.style == accelerate::ProgressStyle::Bar;
  // --profile-steps: LibTorch's profiler over a few optimizer steps, one trace per rank.
  std::optional<accelerate::Profiler> profiler;
  if (options.profile_steps > 0) {
    profiler.emplace(accelerate::ProfileKwargs{.schedule_option =
                                                   accelerate::ProfileSchedule{.warmup = 1,
                                                                               .active = options.profile_steps,
                                                                               .repeat = 1},
                                               .output_trace_dir = options.project_dir + "/profile"},
                     accelerator.process_index(), accelerator.device().is_cuda());
  }
  bool stop = false;
  for (int64_t epoch = train_loader->epoch(); epoch < options.epochs && !stop; ++epoch) {
    train_loader->set_epoch(epoch);
    accelerate::Progress progress("epoch " + std::to_string(epoch), micro_steps_per_epoch, shown_progress, stdout);
    int64_t micro_step = 0;
    int64_t shown_micro_step = 0;
    for (const auto& batch : *train_loader) {
      auto accumulating = accelerator.accumulate(*model);
      const auto loss = torch::cross_entropy_loss(model(batch.data), batch.target);  // fp32 logits under bf16 too
      accelerator.backward(loss);
      optimizer->step();
      scheduler->step();
      optimizer->zero_grad();
      ++micro_step;
      if (!accelerator.sync_gradients()) continue;

      const int64_t step = accelerator.step();
      if (profiler) profiler->step();
      const double loss_value = loss.item<double>();
      progress.advance(micro_step - shown_micro_step, "step " + std::to_string(step) + " loss " + fixed(loss_value));
      shown_micro_step = micro_step;
      accelerator.log({{"train_loss", loss_value}, {"lr", sgd.param_groups().front().options().get_lr()}}, step);
      if (preemption.requested()) accelerator.set_trigger();
      if (accelerator.check_trigger()) {
        const auto saved = accelerator.save_state();
        progress.finish();
        accelerator.print("train: checkpoint " + saved.string() + " at step " + std::to_string(step));
        accelerator.print("train: stopping for requeue after step " + std::to_string(step));
        accelerator.end_training();
        return accelerate::kRequeueExitCode;
      }
      if (options.checkpoint_every > 0 && step % options.checkpoint_every == 0) {
        const auto saved = accelerator.save_state();
        if (accelerator.is_main_process() && !on_terminal) {
          std::cout << "train: checkpoint " << saved.string() << " at step " << step << std::endl;
        }
      }
      if (options.max_steps >= 0 && step >= options.max_steps) {
        stop = true;
        break;
      }
    }
    progress.finish();
    const Metrics metrics = evaluate(accelerator, net, *eval_loader);
    accelerator.log({{"eval_loss", metrics.loss}, {"eval_accuracy", metrics.accuracy}, {"epoch", epoch}},
                    accelerator.step());
    if constexpr (accelerate::config::has_tensorboard) {
      // How the first layer's weights spread, epoch by epoch (TensorBoard's Histograms tab).
      const torch::Tensor weights = net->parameters().front().detach().to(torch::kDouble).contiguous();
      accelerator.get_tracker("tensorboard")
          .log_histogram("first_layer_weights", {weights.data_ptr<double>(), static_cast<std::size_t>(weights.numel())},
                         accelerator.step());
    }
    accelerator.print("train: epoch " + std::to_string(epoch) + " eval loss " + fixed(metrics.loss) + " accuracy " +
                      fixed(metrics.accuracy));
  }
  if (profiler) {
    profiler->stop();
    accelerator.print("train: profile of " + std::to_string(options.profile_steps) + " steps in " +
                      options.project_dir + "/profile (trace_rank<r>.json)");
  }
  const Metrics final_metrics = evaluate(accelerator, net, *eval_loader);
  accelerator.print("train: final eval loss " + fixed(final_metrics.loss, 6) + " accuracy " +
                    fixed(final_metrics.accuracy) + " after " + std::to_string(accelerator.step()) + " steps");
  accelerator.end_training();
  accelerator.print("train: done");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const TrainOptions options = parse_train_options(argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    // One rank's error must not leave the others waiting in a collective.
    accelerate::abort_all(std::string("train: ") + error.what());
  }
}
