// A GPT trained on a synthetic next-token task by the Accelerator: the model
// as LibTorch users write it (gpt_model.hpp: a ModuleList of custom blocks,
// a head tied to the token embedding), AdamW with a warm-up cosine schedule,
// bf16 autocast, gradient accumulation and clipping, checkpoints with
// automatic naming and resume. docs/training.md walks through it beside the
// Python Accelerate script it mirrors.
//
//   mpirun -np 4 gpt --project-dir gpt-run --sharding NO_SHARD --mixed-precision bf16
//
// The task: token streams from a fixed random Markov chain in which every
// token has four likely successors, so the loss falls from ln(vocab) towards
// ln(4) = 1.39 as the model learns the table.
#include <ATen/CPUGeneratorImpl.h>
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <accelerate/accelerate.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "gpt_model.hpp"

namespace {

// Sample i: a token stream of `sequence + 1` tokens; input_ids are the first
// `sequence`, labels the last `sequence` (the next token at every position).
// A sample is a dict, as a transformers dataset's is; the loader stacks each key.
class MarkovTokens {
 public:
  MarkovTokens(int64_t samples, const gpt::GptConfig& config, uint64_t seed) {
    auto table_generator = at::make_generator<at::CPUGeneratorImpl>(1234);  // one chain for every split
    const torch::Tensor successors = torch::randint(config.vocab, {config.vocab, 4}, table_generator);
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    tokens_ = torch::empty({samples, config.sequence + 1}, torch::kInt64);
    tokens_.select(1, 0).copy_(torch::randint(config.vocab, {samples}, generator));
    const torch::Tensor choices = torch::randint(4, {samples, config.sequence}, generator);
    auto tokens = tokens_.accessor<int64_t, 2>();
    auto chosen = choices.accessor<int64_t, 2>();
    auto table = successors.accessor<int64_t, 2>();
    for (int64_t s = 0; s < samples; ++s) {
      for (int64_t t = 0; t < config.sequence; ++t) tokens[s][t + 1] = table[tokens[s][t]][chosen[s][t]];
    }
  }
  std::map<std::string, torch::Tensor> get(std::size_t i) const {
    const torch::Tensor row = tokens_[static_cast<int64_t>(i)];
    return {{"input_ids", row.slice(0, 0, -1)}, {"labels", row.slice(0, 1)}};
  }
  std::optional<std::size_t> size() const { return static_cast<std::size_t>(tokens_.size(0)); }

 private:
  torch::Tensor tokens_;
};

struct Options {
  gpt::GptConfig model;
  std::string project_dir = "gpt-run";
  std::string sharding = "NO_SHARD";
  std::string mixed_precision = "no";
  int64_t batch_size = 8;
  int gradient_accumulation_steps = 2;
  int64_t steps = 60;
  int64_t warmup_steps = 6;
  double lr = 3e-3;
  double max_grad_norm = 1.0;
  int64_t samples = 2048;
  int64_t checkpoint_every = 0;
  bool resume = false;
  int64_t stop_after = -1;
  bool activation_checkpointing = false;
};

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app("A GPT trained on a synthetic next-token task (docs/training.md, \"A transformer\").", "gpt");
  app.add_option("--project-dir", o.project_dir, "checkpoints go to DIR/checkpoints")->capture_default_str();
  app.add_option("--sharding", o.sharding, "NO_SHARD (DDP), SHARD_GRAD_OP (ZeRO-2) or FULL_SHARD (ZeRO-3, a unit per block)")
      ->capture_default_str()
      ->check(CLI::IsMember({"NO_SHARD", "SHARD_GRAD_OP", "FULL_SHARD"}));
  app.add_option("--mixed-precision", o.mixed_precision, "no, bf16 or fp16")->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "sequences per process and micro-step")->capture_default_str();
  app.add_option("--gradient-accumulation-steps", o.gradient_accumulation_steps)->capture_default_str();
  app.add_option("--steps", o.steps, "optimizer steps of the whole run (the schedule's length)")->capture_default_str();
  app.add_option("--warmup-steps", o.warmup_steps, "steps of linear warm-up")->capture_default_str();
  app.add_option("--lr", o.lr, "peak AdamW learning rate")->capture_default_str();
  app.add_option("--max-grad-norm", o.max_grad_norm, "clip the gradients' norm to this")->capture_default_str();
  app.add_option("--d-model", o.model.d_model)->capture_default_str();
  app.add_option("--layers", o.model.layers)->capture_default_str();
  app.add_option("--heads", o.model.heads)->capture_default_str();
  app.add_option("--sequence", o.model.sequence)->capture_default_str();
  app.add_option("--vocab", o.model.vocab)->capture_default_str();
  app.add_option("--samples", o.samples, "training sequences")->capture_default_str();
  app.add_option("--checkpoint-every", o.checkpoint_every, "save every N steps (0: never)")->capture_default_str();
  app.add_flag("--resume", o.resume, "continue from the newest checkpoint, if any");
  app.add_flag("--activation-checkpointing", o.activation_checkpointing,
               "recompute each block's activations in its backward (FULL_SHARD)");
  app.add_option("--stop-after", o.stop_after, "end after this step as if stopped (for resume tests)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::exit(app.exit(error));
  }
  return o;
}

// FULL_SHARD's units are the blocks, as transformer_based_wrap chooses them
// in Python Accelerate; the embeddings, final LayerNorm and tied head form
// the root unit.
// With --activation-checkpointing each block's body (unit.checkpoint in
// BlockImpl::forward) runs again in its backward instead of keeping its
// activations; the plugin refuses it under the other strategies.
accelerate::FullyShardedDataParallelPlugin sharding_plugin(const std::string& sharding, bool activation_checkpointing) {
  accelerate::FullyShardedDataParallelPlugin plugin{.sharding_strategy = sharding};
  if (sharding == "FULL_SHARD") {
    plugin.auto_wrap_policy = "transformer_based_wrap";
    plugin.transformer_cls_names_to_wrap = {"Block"};
  }
  plugin.activation_checkpointing = activation_checkpointing;
  return plugin;
}

int run(const Options& o) {
  accelerate::Accelerator accelerator({
      .mixed_precision = o.mixed_precision,
      .gradient_accumulation_steps = o.gradient_accumulation_steps,
      .project_config = {.project_dir = o.project_dir, .automatic_checkpoint_naming = true, .total_limit = 2},
      .fsdp_plugin = sharding_plugin(o.sharding, o.activation_checkpointing),
  });
  accelerate::set_seed(42);
  gpt::Gpt net(o.model);
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(o.lr).weight_decay(0.1));
  auto schedule =
      accelerate::get_scheduler("cosine", adamw, {.num_warmup_steps = o.warmup_steps, .num_training_steps = o.steps});
  auto [model, optimizer, scheduler, train] =
      accelerator.prepare(net, adamw, *schedule,
                          accelerate::data_loader(MarkovTokens(o.samples, o.model, 7),
                                                  {.batch_size = o.batch_size, .shuffle = true}));
  int64_t parameters = 0;  // each tensor once: the head's weight is the embedding's
  for (const auto& parameter : net->named_parameters()) {
    if (parameter.key() != "lm_head.weight") parameters += parameter.value().numel();
  }
  accelerator.print("gpt: {} process(es), {} sharding, mixed precision {}, {} parameters", accelerator.num_processes(),
                    o.sharding, o.mixed_precision, static_cast<long long>(parameters));
  if (o.resume && accelerator.latest_checkpoint()) {
    accelerator.load_state();
    accelerator.print("gpt: resumed at step {}", accelerator.step());
  }

  const auto loss_of = [&](const torch::Tensor& logits, const torch::Tensor& labels) {
    return torch::cross_entropy_loss(logits.reshape({-1, o.model.vocab}).to(torch::kFloat), labels.reshape({-1}));
  };
  double last_loss = 0.0;
  for (int64_t epoch = train->epoch(); accelerator.step() < o.steps; ++epoch) {
    train->set_epoch(epoch);
    for (const auto& batch : *train) {
      auto accumulating = accelerator.accumulate(*model);
      const torch::Tensor loss = loss_of(model(batch.at("input_ids")), batch.at("labels"));
      accelerator.backward(loss);
      if (accelerator.sync_gradients()) accelerator.clip_grad_norm_(net->parameters(), o.max_grad_norm);
      optimizer->step();
      scheduler->step();
      optimizer->zero_grad();
      if (!accelerator.sync_gradients()) continue;
      // The loss of the step, averaged over every rank (the same on all of them).
      last_loss = accelerator.reduce(loss.detach().reshape({1}), "mean").item<double>();
      const int64_t step = accelerator.step();
      if (step % 10 == 0 || step == o.steps) {
        accelerator.print("gpt: step {} loss {:.4f} lr {:.6f}", step, last_loss,
                          adamw.param_groups().front().options().get_lr());
      }
      if (o.checkpoint_every > 0 && step % o.checkpoint_every == 0) accelerator.save_state();
      if (step == o.stop_after) {
        accelerator.print("gpt: stopping after step {}", step);
        accelerator.end_training();
        return 0;
      }
      if (step >= o.steps) break;
    }
  }
  accelerator.print("gpt: final loss {:.6f} after {} steps", last_loss, accelerator.step());
  accelerator.end_training();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    // One rank's error must not leave the others waiting in a collective.
    accelerate::abort_all(std::string("gpt: ") + error.what());
  }
}
