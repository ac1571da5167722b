// Argument parsers of the accelerate-hpc sub-commands (src/cli/arguments.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "accelerate/checkpoint/safetensors.hpp"

namespace accelerate::cli {

/// `accelerate-hpc config [show] [options]`.
struct ConfigArguments {
  bool show = false;
  bool force = false;
  std::optional<std::string> mixed_precision;
  std::optional<std::string> config_file;
};

/// Fills `options` from `args`; returns the usage error, or nullopt.
std::optional<std::string> parse_config_arguments(std::span<const std::string_view> args, ConfigArguments& options);

/// `accelerate-hpc convert <checkpoint> --to safetensors [--output DIR] [--max-shard-size SIZE]`.
struct ConvertArguments {
  std::filesystem::path checkpoint;
  std::filesystem::path output;
  std::uint64_t max_shard_size = checkpoint::SaveModelOptions{}.max_shard_size;
};

/// "5GB" -> 5e9, "2GiB" -> 2^31, "123" -> 123 (Accelerate's convention:
/// KB/MB/GB/TB are powers of ten, KiB/MiB/GiB powers of two); nullopt if malformed or 0.
std::optional<std::uint64_t> parse_size(std::string_view text);

/// The arguments of convert; prints the problem and the usage to std::cerr and
/// returns nullopt on a usage error.
std::optional<ConvertArguments> parse_convert_arguments(std::span<const std::string_view> args);

}  // namespace accelerate::cli
