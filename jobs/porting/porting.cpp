// The C++ conversion of porting.py, an Accelerate training script, line for
// line (docs/porting.md shows the two side by side): gradient accumulation,
// clipping, a scheduler, evaluation with gather_for_metrics, trackers,
// checkpoints with automatic naming and resume, and the final model.
//
//   mpirun -np 4 porting --project-dir porting-run --epochs 4
#include <ATen/CPUGeneratorImpl.h>
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <accelerate/accelerate.hpp>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace {

class RegressionDataset : public torch::data::datasets::Dataset<RegressionDataset> {
 public:
  RegressionDataset(int64_t samples, uint64_t seed) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    x_ = torch::randn({samples, 16}, generator);
    y_ = torch::sin(x_.sum(1, /*keepdim=*/true) / 4);
  }
  torch::data::Example<> get(size_t i) override { return {x_[static_cast<int64_t>(i)], y_[static_cast<int64_t>(i)]}; }
  torch::optional<size_t> size() const override { return static_cast<size_t>(x_.size(0)); }

 private:
  torch::Tensor x_, y_;
};

struct NetImpl : torch::nn::Module {
  NetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(16, 64))), fc2(register_module("fc2", torch::nn::Linear(64, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

struct Progress {  // the epoch, saved with every checkpoint
  int64_t epoch = 0;
  std::map<std::string, torch::Tensor> state_dict() const { return {{"epoch", torch::tensor(epoch)}}; }
  void load_state_dict(const std::map<std::string, torch::Tensor>& state) { epoch = state.at("epoch").item<int64_t>(); }
};

}  // namespace

int main(int argc, char** argv) {
  std::string project_dir = "porting-run";
  int64_t epochs = 4;
  CLI::App app("The C++ conversion of an Accelerate training script (docs/porting.md).", "porting");
  app.add_option("--project-dir", project_dir, "checkpoints, trackers and the model go here")->capture_default_str();
  app.add_option("--epochs", epochs, "epochs to train in all")->capture_default_str()->check(CLI::Range(1, 1000000));
  CLI11_PARSE(app, argc, argv);

  accelerate::set_seed(42);
  accelerate::Accelerator accelerator(
      {.gradient_accumulation_steps = 2,
       .project_config = {.project_dir = project_dir, .automatic_checkpoint_naming = true, .total_limit = 2},
       .log_with = {"all"}});
  Net net;
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(3e-3));
  torch::optim::StepLR step_lr(adamw, /*step_size=*/20, /*gamma=*/0.5);
  auto train_data = accelerate::data_loader(RegressionDataset(1024, 1), {.batch_size = 16, .shuffle = true});
  auto evaluation_data = accelerate::data_loader(RegressionDataset(256, 2), {.batch_size = 32});
  auto [model, optimizer, scheduler, train, evaluation] =
      accelerator.prepare(net, adamw, step_lr, std::move(train_data), std::move(evaluation_data));
  accelerator.init_trackers("porting", {{"lr", 3e-3}, {"epochs", epochs}});
  Progress progress;
  accelerator.register_for_checkpointing(progress);
  if (std::filesystem::is_directory(std::filesystem::path(project_dir) / "checkpoints")) {
    accelerator.load_state();
    accelerator.print("porting: resumed at epoch {}", progress.epoch);
  }

  torch::Tensor loss;
  for (int64_t epoch = progress.epoch; epoch < epochs; ++epoch) {
    model.module()->train();
    for (const auto& batch : *train) {
      auto accumulating = accelerator.accumulate(*model);
      loss = torch::mse_loss(model(batch.data), batch.target);
      accelerator.backward(loss);
      if (accelerator.sync_gradients()) accelerator.clip_grad_norm_(model.module()->parameters(), 1.0);
      optimizer->step();
      scheduler->step();
      optimizer->zero_grad();
    }
    model.module()->eval();
    std::vector<torch::Tensor> errors;
    for (const auto& batch : *evaluation) {
      torch::NoGradGuard no_grad;
      const auto prediction = model(batch.data);
      errors.push_back(accelerator.gather_for_metrics((prediction - batch.target).pow(2)));
    }
    const double eval_loss = torch::cat(errors).mean().item<double>();
    accelerator.log({{"train_loss", loss.item<double>()}, {"eval_loss", eval_loss}}, epoch);
    accelerator.print("porting: epoch {} eval loss {:.4f}", epoch, eval_loss);
    progress.epoch = epoch + 1;
    accelerator.save_state();
  }

  accelerator.wait_for_everyone();
  accelerator.save_model(*model, std::filesystem::path(project_dir) / "model");
  accelerator.end_training();
  return 0;
}
