// Fuzz target: `accelerate-hpc inspect` and `convert` on a damaged checkpoint
// file. The input is written to <temporary>/state.h5, then both commands run
// on it as a world of one. Property: every damaged file (truncated, bit
// flips, a foreign file, huge declared sizes) ends as an accelerate::Error
// naming the file or as a non-zero exit; no crash, hang or other exception.
#include <fstream>

#include "checkpoint_run.hpp"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  accelerate::fuzz::initialize_checkpoint_harness();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  {
    std::ofstream out(accelerate::fuzz::checkpoint_file(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  accelerate::fuzz::run_checkpoint_commands();
  return 0;
}
