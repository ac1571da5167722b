// A module's checkpointable tensors: its parameters and buffers by qualified
// name (what the pytorch_model group of a checkpoint holds).
#pragma once

#include <map>
#include <string>

namespace at {
class Tensor;
}
namespace torch::nn {
class Module;
}

namespace accelerate::checkpoint {

/// Parameters and buffers of `module` and its submodules, sharing their storage.
std::map<std::string, at::Tensor> module_state(const torch::nn::Module& module);

}  // namespace accelerate::checkpoint
