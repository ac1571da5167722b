// Fuzz target: the argument parsers of accelerate-hpc config and convert.
// The input is split at NUL bytes into arguments. Property: the parsers return
// (an error message or the options), never crash or throw; a parsed size is
// positive.
#include <iostream>
#include <sstream>
#include <vector>

#include "cli/arguments.hpp"
#include "harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = accelerate::fuzz::as_text(data, size);
  std::vector<std::string_view> args;
  for (std::size_t start = 0; start <= text.size() && args.size() < 64;) {
    const std::size_t end = std::min(text.find('\0', start), text.size());
    args.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::ostringstream discarded;  // the usage messages
  std::streambuf* const saved = std::cerr.rdbuf(discarded.rdbuf());
  accelerate::fuzz::expect_clear_errors("", [&] {
    accelerate::cli::ConfigArguments config;
    accelerate::cli::parse_config_arguments(args, config);
    const auto convert = accelerate::cli::parse_convert_arguments(args);
    if (convert && (convert->checkpoint.empty() || convert->output.empty() || convert->max_shard_size == 0)) {
      accelerate::fuzz::finding("convert accepted arguments without a checkpoint, an output or a shard size");
    }
    for (const std::string_view arg : args) {
      if (const auto bytes = accelerate::cli::parse_size(arg); bytes && *bytes == 0) {
        accelerate::fuzz::finding("parse_size accepted a size of 0");
      }
    }
  });
  std::cerr.rdbuf(saved);
  return 0;
}
