#include "accelerate/data/data_seed.hpp"

#include <chrono>
#include <random>
#include <string>

#include "accelerate/error.hpp"
#include "accelerate/random/seed.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "detail/deadline_comm.hpp"

namespace accelerate::detail {

std::uint64_t choose_data_seed(const DataLoaderConfiguration& config, bool shuffle, const State* state,
                               int num_processes, std::string_view component) {
  if (config.data_seed) return *config.data_seed;
  if (!shuffle) return 0;
  // set_seed(s) makes the run a function of s, the data order included; the
  // base seed excludes the device-specific offset, so it is the same on
  // every rank (docs/data-loading.md, "The data seed").
  if (const std::optional<std::uint64_t> seeded = base_seed()) return *seeded;
  if (state == nullptr && num_processes > 1) {
    throw ConfigError(std::string(component) + ": a seeded order (shuffle, or a sampler) without a data_seed on " +
                      std::to_string(num_processes) +
                      " processes needs a State to broadcast a drawn seed, but the loader was built from a "
                      "DataLoaderPlacement. Set DataLoaderConfiguration::data_seed (the same on every rank), or "
                      "build the loader from a State.");
  }
  std::uint64_t seed = 0;
  if (state == nullptr || state->is_main_process()) {
    std::random_device device;
    seed = (static_cast<std::uint64_t>(device()) << 32) ^ device() ^
           static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  if (state != nullptr && state->num_processes() > 1) {
    // Every rank builds the loader; one that does not leaves the others
    // with a TimeoutError that names it. A fixed data_seed skips this step.
    DeadlineComm(state->world_comm(), state->timeout())
        .broadcast(seed, 0, std::string(component) + ": broadcast of the drawn data seed from rank 0");
  }
  return seed;
}

}  // namespace accelerate::detail
