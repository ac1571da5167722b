// How the job is distributed (seeds: accelerate.DistributedType).
#pragma once

#include <string_view>

namespace accelerate {

enum class DistributedType {
  NO,         ///< a single process
  MULTI_CPU,  ///< several processes on CPUs, collectives over MPI
  MULTI_GPU,  ///< several processes with one GPU each, collectives over NCCL
};

constexpr std::string_view to_string(DistributedType type) {
  switch (type) {
    case DistributedType::NO: return "NO";
    case DistributedType::MULTI_CPU: return "MULTI_CPU";
    case DistributedType::MULTI_GPU: return "MULTI_GPU";
  }
  return "UNKNOWN";
}

}  // namespace accelerate
