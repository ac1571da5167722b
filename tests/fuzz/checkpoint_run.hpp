// What the two checkpoint-file harnesses share (checkpoint_h5: the input is
// the file; checkpoint_h5_edits: the input edits a valid file through HDF5):
// MPI started once, a private directory, and the run of `accelerate-hpc
// inspect` and `convert` on the file, whose outcome must be an exit code or
// an accelerate::Error naming the file.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cli/commands.hpp"
#include "harness.hpp"

#if defined(ACCELERATE_FUZZ_OUTCOMES)
// The library cannot be built with clang's coverage here (LibTorch 1.13's
// headers do not compile with clang 14 in C++20), so libFuzzer is linked into
// the normal build and guided by outcomes instead of edges: each distinct
// error (its text without numbers) bumps its own counter, so an input
// that reaches a new error in the reader is kept and mutated further.
extern "C" void __sanitizer_cov_8bit_counters_init(std::uint8_t* start, std::uint8_t* stop);
extern "C" void __sanitizer_cov_pcs_init(const std::uintptr_t* begin, const std::uintptr_t* end);
namespace accelerate::fuzz {
constexpr std::size_t kOutcomes = 4096;
static std::uint8_t outcome_counters[kOutcomes];  // one harness TU per binary
static std::uintptr_t outcome_pcs[2 * kOutcomes];
[[maybe_unused]] static const bool outcomes_registered = [] {
  for (std::size_t i = 0; i < kOutcomes; ++i) outcome_pcs[2 * i] = i + 1;  // distinct pseudo-PCs
  __sanitizer_cov_8bit_counters_init(outcome_counters, outcome_counters + kOutcomes);
  __sanitizer_cov_pcs_init(outcome_pcs, outcome_pcs + 2 * kOutcomes);
  return true;
}();
inline void record_outcome(std::string_view text) {
  // Numbers (decimal, and hexadecimal after "0x": checksums) do not make an outcome new.
  std::size_t hash = 14695981039346656037ULL;
  bool hexadecimal = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == 'x' && i > 0 && text[i - 1] == '0') hexadecimal = true;
    const bool hex_digit = (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if ((c >= '0' && c <= '9') || (hexadecimal && (hex_digit || c == 'x'))) continue;
    hexadecimal = false;
    hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  }
  ++outcome_counters[hash % kOutcomes];
}
}  // namespace accelerate::fuzz
#else
namespace accelerate::fuzz {
inline void record_outcome(std::string_view) {}
}  // namespace accelerate::fuzz
#endif

namespace accelerate::fuzz {

inline std::filesystem::path checkpoint_work_directory;

inline void finalize_checkpoint_harness() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0) MPI_Finalize();
  std::error_code ignored;
  std::filesystem::remove_all(checkpoint_work_directory, ignored);
}

/// For LLVMFuzzerInitialize: MPI once per process (the commands' State adopts
/// it, a world of one) and a private directory for the file and the output.
inline void initialize_checkpoint_harness() {
  // Open MPI's own handlers of SIGABRT and SIGSEGV would report a finding
  // before libFuzzer could save the input that caused it.
  ::setenv("OMPI_MCA_opal_signal", "", 0);
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  std::atexit(finalize_checkpoint_harness);
  checkpoint_work_directory =
      std::filesystem::temp_directory_path() / ("accelerate-fuzz-h5-" + std::to_string(::getpid()));
  std::filesystem::create_directories(checkpoint_work_directory);
}

/// The file the harness writes and the commands read.
inline std::filesystem::path checkpoint_file() { return checkpoint_work_directory / "state.h5"; }

/// Runs inspect and convert on checkpoint_file(), their reports discarded.
inline void run_checkpoint_commands() {
  const std::string file_name = checkpoint_file().string();
  const std::filesystem::path output = checkpoint_work_directory / "converted";
  std::filesystem::remove_all(output);
  const std::string output_name = output.string();
  std::ostringstream discarded;
  std::streambuf* const saved = std::cout.rdbuf(discarded.rdbuf());
  std::streambuf* const saved_err = std::cerr.rdbuf(discarded.rdbuf());
  int inspected = 0;
  record_outcome(expect_clear_errors(file_name, [&] {
    const std::vector<std::string_view> args{file_name};
    inspected = cli::run_inspect(args);
  }));
  int converted = 0;
  record_outcome(expect_clear_errors(file_name, [&] {
    const std::vector<std::string_view> args{file_name, "--to", "safetensors", "--output", output_name};
    converted = cli::run_convert(args);
  }));
  record_outcome(std::string(1, static_cast<char>('a' + inspected)) + static_cast<char>('a' + converted));
  std::cout.rdbuf(saved);
  std::cerr.rdbuf(saved_err);
}

}  // namespace accelerate::fuzz
