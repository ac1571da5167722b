// Command-line arguments of the accelerate-hpc sub-commands, parsed without
// touching MPI, LibTorch or HDF5 (so they can be tested and fuzzed alone).
#include "cli/arguments.hpp"

#include <array>
#include <cctype>
#include <cstdint>
#include <iostream>
#include <system_error>

namespace accelerate::cli {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kConvertUsage =
    "usage: accelerate-hpc convert <checkpoint directory or state file> --to safetensors\n"
    "                              [--output DIR] [--max-shard-size SIZE]\n"
    "  --output          directory for the model files (default: <checkpoint>-safetensors beside it)\n"
    "  --max-shard-size  largest shard, e.g. 5GB, 500MB, 2GiB or bytes (default 10GB)\n";

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 15) return std::nullopt;
  const std::uint64_t number = std::stoull(std::string(text.substr(0, digits)));
  std::string unit(text.substr(digits));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::array<std::pair<std::string_view, std::uint64_t>, 9> kUnits{{{"", 1},
                                                                                 {"B", 1},
                                                                                 {"KB", 1'000},
                                                                                 {"MB", 1'000'000},
                                                                                 {"GB", 1'000'000'000},
                                                                                 {"KIB", 1ULL << 10},
                                                                                 {"MIB", 1ULL << 20},
                                                                                 {"GIB", 1ULL << 30},
                                                                                 {"TB", 1'000'000'000'000}}};
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) {
      if (number == 0 || number > UINT64_MAX / factor) return std::nullopt;
      return number * factor;
    }
  }
  return std::nullopt;
}

// Accepts "--name value" and "--name=value", with '_' or '-' inside names as
// Accelerate's launcher does. Returns an error message, or nullopt.
std::optional<std::string> parse_config_arguments(std::span<const std::string_view> args, ConfigArguments& options) {
  std::size_t i = 0;
  if (!args.empty() && args[0] == "show") {
    options.show = true;
    i = 1;
  }
  for (; i < args.size(); ++i) {
    std::string name(args[i]);
    std::optional<std::string> value;
    if (const std::size_t equals = name.find('='); equals != std::string::npos && name.starts_with("--")) {
      value = name.substr(equals + 1);
      name.resize(equals);
    }
    for (std::size_t c = 2; c < name.size(); ++c) {
      if (name[c] == '-') name[c] = '_';
    }
    const auto take_value = [&]() -> std::optional<std::string> {
      if (value) return value;
      if (i + 1 < args.size()) return std::string(args[++i]);
      return std::nullopt;
    };
    if (name == "--force" && !value) {
      options.force = true;
    } else if (name == "--mixed_precision") {
      options.mixed_precision = take_value();
      if (!options.mixed_precision) return "--mixed_precision needs a value: no, fp16 or bf16";
      for (char& c : *options.mixed_precision) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (name == "--config_file") {
      options.config_file = take_value();
      if (!options.config_file || options.config_file->empty()) return "--config_file needs a path";
    } else {
      return "unknown argument '" + std::string(args[i]) + "'";
    }
  }
  if (options.show && (options.force || options.mixed_precision)) {
    return "'show' takes only --config_file";
  }
  if (options.mixed_precision && *options.mixed_precision != "no" && *options.mixed_precision != "fp16" &&
      *options.mixed_precision != "bf16") {
    return "--mixed_precision '" + *options.mixed_precision + "' is not one of no, fp16, bf16";
  }
  return std::nullopt;
}

/// Parses the arguments; prints the problem and returns nullopt on a usage error.
std::optional<ConvertArguments> parse_convert_arguments(std::span<const std::string_view> args) {
  ConvertArguments parsed;
  std::optional<std::string_view> format;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    const bool has_value = i + 1 < args.size();
    if (arg == "--to" || arg == "--output" || arg == "--max-shard-size") {
      if (!has_value) {
        std::cerr << "accelerate-hpc convert: " << arg << " needs a value\n" << kConvertUsage;
        return std::nullopt;
      }
      const std::string_view value = args[++i];
      if (arg == "--to") {
        format = value;
      } else if (arg == "--output") {
        parsed.output = fs::path(value);
      } else {
        const auto size = parse_size(value);
        if (!size) {
          std::cerr << "accelerate-hpc convert: --max-shard-size '" << value
                    << "' is not a size; write e.g. 5GB, 500MB, 2GiB or a number of bytes (> 0)\n";
          return std::nullopt;
        }
        parsed.max_shard_size = *size;
      }
    } else if (arg.starts_with("-")) {
      std::cerr << "accelerate-hpc convert: unknown option '" << arg << "'\n" << kConvertUsage;
      return std::nullopt;
    } else if (parsed.checkpoint.empty()) {
      parsed.checkpoint = fs::path(arg);
    } else {
      std::cerr << "accelerate-hpc convert: more than one checkpoint given ('" << parsed.checkpoint.string()
                << "' and '" << arg << "')\n"
                << kConvertUsage;
      return std::nullopt;
    }
  }
  if (parsed.checkpoint.empty() || !format) {
    std::cerr << kConvertUsage;
    return std::nullopt;
  }
  if (*format != "safetensors") {
    std::cerr << "accelerate-hpc convert: unknown format '" << *format
              << "' for --to; the supported format is 'safetensors'\n";
    return std::nullopt;
  }
  if (parsed.output.empty()) {
    fs::path base = parsed.checkpoint;
    if (!base.has_filename()) base = base.parent_path();  // "dir/" -> "dir"
    std::error_code unreadable;  // a name the file system refuses is reported when convert opens it
    if (fs::is_regular_file(base, unreadable)) base.replace_extension();
    parsed.output = base.string() + "-safetensors";
  }
  return parsed;
}

}  // namespace accelerate::cli
