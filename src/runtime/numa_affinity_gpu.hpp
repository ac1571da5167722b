// PCI bus ids of the GPUs this process can see, in CUDA device order (so
// after CUDA_VISIBLE_DEVICES remapping). Kept apart so that the affinity code
// compiles without CUDA headers.
#pragma once

#include <string>
#include <vector>

namespace accelerate::detail {

/// "dddd:bb:dd.f" of each visible CUDA device; empty without CUDA or GPUs.
std::vector<std::string> visible_gpu_pci_bus_ids();

}  // namespace accelerate::detail
