// A job whose ranks raise errors at the same time, as a collectively checked
// failure does, for error_report_test.sh: abort_all must print each distinct
// message once, with the ranks that raised it.
//
//   error_report_job same        every rank raises the same error
//   error_report_job different   even and odd ranks raise two different errors
//   error_report_job one <rank>  only <rank> raises; the others wait in a barrier
//
// As in jobs/train, the error unwinds through the State before main's handler
// calls abort_all with the job's name in front of the rank-prefixed text.
#include <accelerate/error.hpp>
#include <accelerate/runtime/process_control.hpp>
#include <accelerate/runtime/state.hpp>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

namespace {

using accelerate::detail::where;

int run(const std::string& mode, int failing) {
  accelerate::StateOptions options;
  options.timeout = std::chrono::seconds(600);  // far beyond the test's limit: only the abort may end the barrier
  const accelerate::State state(options);
  const int rank = state.process_index();
  if (mode == "same") {
    throw accelerate::ConfigError(where() +
                                  " load_state: the checkpoint does not match the model.\n"
                                  "  missing keys: layer.weight\n"
                                  "  unexpected keys: layer.bias\n"
                                  "Load a checkpoint of this model, or pass strict = false.");
  }
  if (mode == "different") {
    if (rank % 2 == 0) {
      throw accelerate::ConfigError(where() + " even ranks: the data file is missing.\n  path: data/even.bin");
    }
    throw accelerate::ConfigError(where() + " odd ranks: the data file is truncated.\n  path: data/odd.bin");
  }
  if (mode == "one") {
    if (rank == failing) {
      throw accelerate::Error(where() + " only this rank failed: out of memory.\n  requested: 4096 MiB");
    }
    state.wait_for_everyone("the barrier the other ranks wait in");
    std::cout << "rank " << rank << " left the barrier" << std::endl;
    return 0;
  }
  std::cerr << "usage: error_report_job same|different|one <rank>\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int failing = argc > 2 ? std::atoi(argv[2]) : 0;
  try {
    return run(mode, failing);
  } catch (const std::exception& error) {
    accelerate::abort_all(std::string("error_report_job: ") + error.what(), 7);
  }
}
