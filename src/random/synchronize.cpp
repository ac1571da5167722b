// synchronize_rng_states: rank 0's generator states broadcast to the group,
// after one all-reduce in which the ranks agree that the request is valid
// and identical everywhere, so that a bad argument on one rank becomes an
// error on every rank instead of a broadcast that never matches.
#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <string>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/random/rng_state.hpp"
#include "random/generator_state.hpp"

namespace accelerate {

namespace {

// Slots of the agreement vector, reduced with MAX; a minimum travels negated.
enum Slot : int {
  kBadName,           // 1: this rank listed an unknown name
  kMissingGenerator,  // 1: "generator" listed without a generator
  kListHashMax,       // hash of the list as given
  kListHashMinNeg,
  kStateSizeMax,  // the generator's state size, -1 without one
  kStateSizeMinNeg,
  kGpusMax,
  kGpusMinNeg,
  kSlots
};

std::int64_t list_hash(const std::vector<std::string>& names) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto& name : names) {
    for (const char c : name + '\n') {
      hash ^= static_cast<unsigned char>(c);
      hash *= 0x100000001b3ULL;
    }
  }
  return static_cast<std::int64_t>(hash >> 2);  // non-negative, so it can be negated
}

void broadcast_into(at::Generator& generator, ProcessGroup& group) {
  at::Tensor state = detail::generator_state(generator);
  BroadcastOptions from_root;
  from_root.root = 0;
  group.broadcast(state, from_root);
  if (group.rank() != 0) detail::set_generator_state(generator, state, "synchronize_rng_states");
}

}  // namespace

void synchronize_rng_states(const std::vector<std::string>& rng_types, ProcessGroup& group, at::Generator* generator) {
  const std::string call = "synchronize_rng_states";
  std::vector<RngType> types;
  std::optional<std::string> local_error;
  for (const auto& name : rng_types) {
    try {
      types.push_back(parse_rng_type(name));
    } catch (const ConfigError& error) {
      if (!local_error) local_error = error.what();
    }
  }
  bool wants_generator = false;
  for (const RngType type : types) wants_generator = wants_generator || type == RngType::Generator;

  std::array<std::int64_t, kSlots> mine{};
  mine[kBadName] = local_error ? 1 : 0;
  mine[kMissingGenerator] = wants_generator && generator == nullptr ? 1 : 0;
  const std::int64_t hash = list_hash(rng_types);
  mine[kListHashMax] = hash;
  mine[kListHashMinNeg] = -hash;
  const std::int64_t size = wants_generator && generator != nullptr ? detail::generator_state(*generator).numel() : -1;
  mine[kStateSizeMax] = size;
  mine[kStateSizeMinNeg] = -size;
  const std::int64_t gpus = detail::visible_gpus();
  mine[kGpusMax] = gpus;
  mine[kGpusMinNeg] = -gpus;
  at::Tensor agreed = at::tensor(at::ArrayRef<std::int64_t>(mine.data(), mine.size()), at::kLong);
  AllReduceOptions max;
  max.op = ReduceOp::Max;
  group.all_reduce(agreed, max);
  const auto* all = agreed.data_ptr<std::int64_t>();

  const std::string prefix = call + ": ";
  if (all[kBadName] != 0) {
    if (local_error) throw ConfigError(*local_error);
    throw ConfigError(prefix +
                      "another rank listed an unknown rng type (see its error). Valid: \"torch\", "
                      "\"cuda\", \"generator\".");
  }
  if (all[kListHashMax] != -all[kListHashMinNeg]) {
    throw ConfigError(prefix + "the ranks listed different rng types (this rank: " + std::to_string(rng_types.size()) +
                      " name(s)). Pass the same rng_types on every rank of the group.");
  }
  if (all[kMissingGenerator] != 0) {
    throw ConfigError(prefix + (mine[kMissingGenerator] != 0 ? "this rank" : "another rank") +
                      " listed \"generator\" without passing a generator. Pass the generator to synchronise "
                      "(e.g. the sampler's) on every rank, or drop \"generator\".");
  }
  if (all[kStateSizeMax] != -all[kStateSizeMinNeg]) {
    throw ConfigError(prefix + "the generators differ in kind between ranks (state sizes from " +
                      std::to_string(-all[kStateSizeMinNeg]) + " to " + std::to_string(all[kStateSizeMax]) +
                      " bytes). Pass generators of the same device type on every rank.");
  }
  // "cuda" is synchronised only when every rank has the same number of GPUs
  // (none, on a CPU-only job: then it is skipped everywhere).
  const bool sync_cuda = all[kGpusMax] == -all[kGpusMinNeg] && all[kGpusMax] > 0;

  for (const RngType type : types) {
    switch (type) {
      case RngType::Torch: {
        at::Generator cpu = at::globalContext().defaultGenerator(c10::DeviceType::CPU);
        broadcast_into(cpu, group);
        break;
      }
      case RngType::Cuda:
        if (!sync_cuda) break;
        for (int index = 0; index < gpus; ++index) {
          at::Generator gpu = detail::cuda_generator(index);
          broadcast_into(gpu, group);
        }
        break;
      case RngType::Generator: broadcast_into(*generator, group); break;
    }
  }
}

void synchronize_rng_state(RngType rng_type, ProcessGroup& group, at::Generator* generator) {
  synchronize_rng_states({std::string(to_string(rng_type))}, group, generator);
}

}  // namespace accelerate
