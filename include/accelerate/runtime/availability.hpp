// What this build and this machine can do (seeds: is_bf16_available,
// is_torch_version, …). Build-time features come from accelerate/config.hpp;
// these functions add what can only be known at run time.
#pragma once

#include <string>
#include <string_view>

namespace accelerate {

/// LibTorch was built with CUDA and at least one GPU is visible.
bool is_cuda_available();
/// This build contains the NCCL backend (no GPU needed to answer).
bool is_nccl_available();
/// This build writes checkpoints through parallel HDF5.
bool is_hdf5_parallel();
/// This build offers the Kokkos interoperability layer.
bool is_kokkos_available();
/// This build can bind ranks to NUMA domains through hwloc.
bool is_hwloc_available();
/// bfloat16 math is usable: on the CPU always (LibTorch emulates it), on
/// CUDA when every visible GPU has compute capability 8.0 or newer.
bool is_bf16_available();
/// CPU autocast can compute in float16: LibTorch 2.5 or newer (PyTorch
/// documents float16 CPU autocast from 2.5; 1.13's CPU autocast is bfloat16
/// only). Decides whether mixed_precision "fp16" is accepted on the CPU.
bool is_cpu_fp16_autocast_available();

/// The LibTorch version this library was compiled against, e.g. "1.13.0".
std::string torch_version();

/// Compares torch_version() with `version` using `operation`, one of
/// "<", "<=", "==", "!=", ">=", ">". Missing components count as 0, so
/// is_torch_version(">=", "2") holds for 2.1.0. Bad input: ConfigError.
bool is_torch_version(std::string_view operation, std::string_view version);

/// Compares two dotted versions the same way (exposed for tests and tools).
bool compare_versions(std::string_view left, std::string_view operation, std::string_view right);

}  // namespace accelerate
