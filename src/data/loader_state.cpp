#include "accelerate/data/loader_state.hpp"

#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "accelerate/data/skip.hpp"
#include "accelerate/error.hpp"

// LoaderState, resume_point and skip_first_batches (include/accelerate/data/
// loader_state.hpp, skip.hpp; docs/data-loading.md, "Exact resume").

namespace accelerate {
namespace {

using std::int64_t;

[[noreturn]] void state_error(std::string_view component, const std::string& what) {
  throw ConfigError(std::string(component) + ": " + what);
}

std::string str(int64_t value) { return std::to_string(value); }

std::string field(std::string_view name) { return "field \"" + std::string(name) + "\""; }

constexpr const char* kCorrupt =
    " The state is damaged or was not written by LoaderState::state_dict(); load the checkpoint it came from "
    "again, or start the epoch afresh.";

// The batches of the epoch's stream, counting a short or padded last one:
// ceil(n / G), without overflow.
int64_t batches_in_epoch(int64_t dataset_size, int64_t global_batch_size) {
  return dataset_size / global_batch_size + (dataset_size % global_batch_size != 0 ? 1 : 0);
}

// "1, 2, 4, 8": the world sizes that divide G (at most 12 of them).
std::string divisors_of(int64_t value) {
  std::vector<int64_t> low;
  std::vector<int64_t> high;
  for (int64_t d = 1; d <= value / d; ++d) {
    if (value % d != 0) continue;
    low.push_back(d);
    if (d != value / d) high.push_back(value / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  std::string text;
  const std::size_t shown = std::min<std::size_t>(low.size(), 12);
  for (std::size_t i = 0; i < shown; ++i) text += (i > 0 ? ", " : "") + str(low[i]);
  if (shown < low.size()) text += ", ...";
  return text;
}

void validate_state(const LoaderState& s, std::string_view component) {
  if (s.epoch < 0)
    state_error(component, field("epoch") + " is " + str(s.epoch) + ", but epochs count from 0." + kCorrupt);
  if (s.global_batch_size < 1) {
    state_error(component, field("global_batch_size") + " is " + str(s.global_batch_size) +
                               ", but a batch holds at least one sample." + kCorrupt);
  }
  if (s.world_size < 1) {
    state_error(component,
                field("world_size") + " is " + str(s.world_size) + ", but at least one process takes part." + kCorrupt);
  }
  if (s.global_batch_size % s.world_size != 0) {
    state_error(component, field("global_batch_size") + " is " + str(s.global_batch_size) +
                               ", which is not a multiple of " + field("world_size") + " (" + str(s.world_size) +
                               "), but every process takes the same share of each batch." + kCorrupt);
  }
  if (s.samples_consumed < 0) {
    state_error(component,
                field("samples_consumed") + " is " + str(s.samples_consumed) + "; it cannot be negative." + kCorrupt);
  }
  if (s.samples_consumed % s.global_batch_size != 0) {
    state_error(component,
                field("samples_consumed") + " is " + str(s.samples_consumed) +
                    ", which is not a multiple of the global batch size " + str(s.global_batch_size) +
                    "; the ranks consume whole batches together (batches completed times the global batch size)." +
                    kCorrupt);
  }
  if (s.dataset_size < -1) {
    state_error(component, field("dataset_size") + " is " + str(s.dataset_size) +
                               ", but it is a number of samples, or -1 when unknown." + kCorrupt);
  }
  if (s.dataset_size >= 0 &&
      s.samples_consumed / s.global_batch_size > batches_in_epoch(s.dataset_size, s.global_batch_size)) {
    state_error(component, field("samples_consumed") + " is " + str(s.samples_consumed) + ", but an epoch of " +
                               str(s.dataset_size) + " samples in batches of " + str(s.global_batch_size) +
                               " has only " + str(batches_in_epoch(s.dataset_size, s.global_batch_size)) +
                               " batches (" +
                               str(batches_in_epoch(s.dataset_size, s.global_batch_size) * s.global_batch_size) +
                               " positions with padding)." + kCorrupt);
  }
}

constexpr std::string_view kKeys[] = {"version",           "seed",       "epoch",       "samples_consumed",
                                      "global_batch_size", "world_size", "dataset_size"};

std::string key_list() {
  std::string text;
  for (std::string_view key : kKeys) text += (text.empty() ? "" : ", ") + std::string(key);
  return text;
}

}  // namespace

void LoaderState::validate() const { validate_state(*this, "LoaderState"); }

LoaderState::Dict LoaderState::state_dict() const {
  validate_state(*this, "LoaderState::state_dict");
  return {{"version", kFormatVersion},
          {"seed", static_cast<int64_t>(seed)},  // same bits; C++20 conversion is modular
          {"epoch", epoch},
          {"samples_consumed", samples_consumed},
          {"global_batch_size", global_batch_size},
          {"world_size", world_size},
          {"dataset_size", dataset_size}};
}

LoaderState LoaderState::from_state_dict(const Dict& dict) {
  constexpr std::string_view component = "LoaderState::from_state_dict";
  for (const auto& [key, value] : dict) {
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      state_error(component, "the state has an unknown " + field(key) + " (value " + str(value) +
                                 "); a loader state has " + "exactly the keys " + key_list() + "." + kCorrupt);
    }
  }
  for (std::string_view key : kKeys) {
    if (!dict.contains(std::string(key))) {
      state_error(component,
                  "the state has no " + field(key) + "; a loader state has the keys " + key_list() + "." + kCorrupt);
    }
  }
  const int64_t version = dict.at("version");
  if (version != kFormatVersion) {
    state_error(component,
                field("version") + " is " + str(version) + ", but this build reads version " + str(kFormatVersion) +
                    (version > kFormatVersion ? ". The state was written by a newer Accelerate-HPC; resume with "
                                                "that version."
                                              : "." + std::string(kCorrupt)));
  }
  const int64_t world = dict.at("world_size");
  if (world < 1 || world > INT_MAX) {
    state_error(component, field("world_size") + " is " + str(world) + ", but it is a number of processes (1 to " +
                               str(INT_MAX) + ")." + kCorrupt);
  }
  LoaderState state;
  state.seed = static_cast<std::uint64_t>(dict.at("seed"));
  state.epoch = dict.at("epoch");
  state.samples_consumed = dict.at("samples_consumed");
  state.global_batch_size = dict.at("global_batch_size");
  state.world_size = static_cast<int>(world);
  state.dataset_size = dict.at("dataset_size");
  validate_state(state, component);
  return state;
}

void LoaderState::advance(int64_t batches) {
  constexpr std::string_view component = "LoaderState::advance";
  validate_state(*this, component);
  if (batches < 0) state_error(component, "cannot go back " + str(-batches) + " batches; pass a count of 0 or more.");
  if (batches > (INT64_MAX - samples_consumed) / global_batch_size) {
    state_error(component, "advancing by " + str(batches) + " batches of " + str(global_batch_size) +
                               " samples overflows the sample count. Pass the batches completed since the last call.");
  }
  samples_consumed += batches * global_batch_size;
}

void LoaderState::start_epoch(int64_t next) {
  if (next < 0) {
    state_error("LoaderState::start_epoch", "the epoch is " + str(next) + ", but epochs count from 0.");
  }
  epoch = next;
  samples_consumed = 0;
}

ResumePoint resume_point(const LoaderState& saved, int64_t global_batch_size, const BatchSamplerShardOptions& options,
                         int64_t dataset_size) {
  constexpr std::string_view component = "resume_point";
  validate_state(saved, component);
  detail::check_shard_arguments(component, std::nullopt, options.num_processes, options.process_index,
                                options.split_batches);
  const int64_t processes = options.num_processes;
  const int64_t g = global_batch_size;
  const std::string next_epoch = "start_epoch(" + str(saved.epoch + 1) + ")";
  if (g < 1) {
    state_error(component,
                "the global batch size is " + str(g) +
                    ", but a batch needs at least one sample. Pass this run's batch size times the number of "
                    "processes (or the batch size with split_batches).");
  }
  // Mid-epoch, the samples already consumed fix the batching of the rest.
  // At the start of an epoch (nothing consumed) any batch size will do.
  const bool mid_epoch = saved.samples_consumed > 0;
  if (mid_epoch && g != saved.global_batch_size) {
    const int64_t saved_g = saved.global_batch_size;
    std::string keep;
    if (saved_g % processes == 0) {
      keep = "Keep it at " + str(saved_g) + ": give each of the " + str(processes) + " processes a batch size of " +
             str(saved_g / processes) + " (or " + str(saved_g) +
             " with split_batches), with gradient accumulation if that no longer fits. ";
    } else {
      keep = "Keep it at " + str(saved_g) + " by running on a number of processes that divides it (" +
             divisors_of(saved_g) + "), not " + str(processes) + ". ";
    }
    state_error(component,
                "the state was saved with a global batch size of " + str(saved_g) + " (on " + str(saved.world_size) +
                    " process" + (saved.world_size == 1 ? "" : "es") + "), but this run's global batch size is " +
                    str(g) +
                    ". Batch k of every rank is cut from "
                    "the samples k*G to (k+1)*G-1 of the epoch's order, so only the same global batch size G "
                    "continues epoch " +
                    str(saved.epoch) + " exactly after its first " + str(saved.samples_consumed) + " samples. " + keep +
                    "Or, to change the batch size, resume at the start of the next epoch: call " + next_epoch +
                    " on the loaded LoaderState (the rest of epoch " + str(saved.epoch) + " is then not seen).");
  }
  if (g % processes != 0) {
    state_error(component,
                "the global batch size " + str(g) + " cannot be divided among " + str(processes) +
                    " processes; every process takes G / num_processes samples of each batch. Run on a number "
                    "of processes that divides " +
                    str(g) + " (" + divisors_of(g) + ")" +
                    (mid_epoch ? ", or resume at the start of the next epoch with another global batch size: "
                                 "call " +
                                     next_epoch + " on the loaded LoaderState."
                               : ", or choose a global batch size that is a multiple of " + str(processes) + "."));
  }
  if (mid_epoch && dataset_size >= 0 && saved.dataset_size >= 0 && dataset_size != saved.dataset_size) {
    state_error(component,
                "the state was saved on a dataset of " + str(saved.dataset_size) + " samples, but this run's has " +
                    str(dataset_size) + ". The shuffled order of an epoch depends on the dataset size, so epoch " +
                    str(saved.epoch) + " cannot be continued after its first " + str(saved.samples_consumed) +
                    " samples. Restore the dataset, or resume at the start of the next epoch: call " + next_epoch +
                    " on the loaded LoaderState.");
  }
  ResumePoint point;
  point.epoch = saved.epoch;
  point.batch_index = saved.samples_consumed / g;
  point.process_batch_size = g / processes;
  point.batch_size = options.split_batches ? g : point.process_batch_size;
  point.first_sample = saved.samples_consumed + options.process_index * point.process_batch_size;
  return point;
}

namespace detail {

void check_skip_count(std::string_view component, int64_t n) {
  if (n < 0) {
    state_error(component, "cannot skip " + str(n) +
                               " batches; pass the number of batches already consumed (0 or more), "
                               "e.g. ResumePoint::batch_index.");
  }
}

}  // namespace detail

SkippedBatches skip_first_batches(const BatchSamplerShard& shard, int64_t n) {
  detail::check_skip_count("skip_first_batches", n);
  const int64_t k = std::min(n, shard.size());
  return {shard.begin() + static_cast<std::ptrdiff_t>(k), shard.end()};
}

}  // namespace accelerate
