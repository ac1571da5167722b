// FusedSGD, FusedAdam, FusedAdamW: torch::optim's SGD, Adam and AdamW with a
// step that updates each flat buffer of parameters in one pass, instead of
// LibTorch's ten or so operations per parameter tensor.
//
//   accelerate::FusedAdamW optimizer(net->parameters(),
//                                    torch::optim::AdamWOptions(3e-4).weight_decay(0.1));
//   loss.backward();
//   optimizer.step();
//   optimizer.zero_grad();
//
// Each is a subclass of the torch::optim optimizer of the same kind, with
// its options, param groups, state type and serialisation: anything that
// takes that optimizer (or any torch::optim::Optimizer) takes these, among
// them Accelerator::prepare, ShardedOptimizer, LR schedulers, the library's
// checkpoints and torch::save/load. A checkpoint of FusedAdamW is one of
// torch::optim::AdamW and loads into either, and likewise for the others.
//
// Construction moves the parameters of each param group into flat storage
// (FlatParameters: one buffer of values and one of gradients per dtype and
// device; a tied weight is listed once). A parameter's .grad becomes its range
// of the flat gradient when it first has one (at construction, or the step
// after its first backward copies it in), so from then on backward
// accumulates into the flat gradient. From construction on the parameters
// are views of the flat buffer: do not resize, set_() or set_data() them (a
// parameter so replaced is copied back at the next step; a model moved or
// cast after the optimizer was built, as Accelerator::prepare places it, is
// flattened anew where it is, at its first step). Gradients behave as in
// torch::optim: an undefined .grad skips its parameter.
//
// step() steps, per param group, every "run" of parameters that lie back to
// back in memory, with their gradients back to back too and the same step
// count, with one kernel: on a fresh optimizer that is one pass per (group,
// dtype, device). The per-parameter state (exp_avg, exp_avg_sq,
// max_exp_avg_sq and step; momentum_buffer) is created at the first step as
// ranges of flat state buffers and kept in state() under torch::optim's keys
// and types (AdamWParamState, ...). State that a load replaced is gathered
// back into flat buffers at the next step. Parameters that are not back to
// back (param groups re-pointed at shards by ShardedOptimizer or
// FullyShardedModel, parameters added with add_param_group) are stepped
// correctly, one run per contiguous stretch.
//
// The arithmetic is torch::optim's, operation for operation; results agree
// with it to floating-point rounding. LibTorch 2.4 and later: the step runs
// at::_fused_sgd_ / _fused_adam_ / _fused_adamw_ on CPU and CUDA. LibTorch
// 1.13: a vectorised loop on the CPU, parallel over at::parallel_for's
// threads (bfloat16 and float16 computed in float, rounded once), and
// whole-run tensor operations on other devices.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <vector>

#include "accelerate/training/flat_parameters.hpp"

namespace accelerate {

class FusedSGD : public torch::optim::SGD {
 public:
  FusedSGD(std::vector<torch::optim::OptimizerParamGroup> param_groups, torch::optim::SGDOptions defaults);
  FusedSGD(std::vector<at::Tensor> params, torch::optim::SGDOptions defaults);

  at::Tensor step(LossClosure closure = nullptr) override;
  /// Zeroes the flat gradients, one fill per buffer. `set_to_none` drops the
  /// gradients instead, as torch::optim's zero_grad(true) does (the next
  /// step copies the new ones back into the flat gradient).
  void zero_grad(bool set_to_none = false);
  /// Per param group, its flat storage.
  [[nodiscard]] const std::vector<FlatParameters>& flat_parameters() const { return flat_; }

 private:
  std::vector<FlatParameters> flat_;
};

class FusedAdam : public torch::optim::Adam {
 public:
  FusedAdam(std::vector<torch::optim::OptimizerParamGroup> param_groups, torch::optim::AdamOptions defaults = {});
  FusedAdam(std::vector<at::Tensor> params, torch::optim::AdamOptions defaults = {});

  at::Tensor step(LossClosure closure = nullptr) override;
  void zero_grad(bool set_to_none = false);
  [[nodiscard]] const std::vector<FlatParameters>& flat_parameters() const { return flat_; }

 private:
  std::vector<FlatParameters> flat_;
};

class FusedAdamW : public torch::optim::AdamW {
 public:
  FusedAdamW(std::vector<torch::optim::OptimizerParamGroup> param_groups, torch::optim::AdamWOptions defaults = {});
  FusedAdamW(std::vector<at::Tensor> params, torch::optim::AdamWOptions defaults = {});

  at::Tensor step(LossClosure closure = nullptr) override;
  void zero_grad(bool set_to_none = false);
  [[nodiscard]] const std::vector<FlatParameters>& flat_parameters() const { return flat_; }

 private:
  std::vector<FlatParameters> flat_;
};

}  // namespace accelerate
