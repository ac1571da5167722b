// The command line of accelerate-hpc: one CLI11 application per sub-command,
// defined once here and used three ways: to parse (run_* through parse_*),
// for the generated --help, and for the shell completion script. Nothing in
// here touches MPI, LibTorch or HDF5, so the parsers can be tested and fuzzed
// alone.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "accelerate/checkpoint/safetensors.hpp"

namespace accelerate::cli {

/// `accelerate-hpc config [show] [options]`.
struct ConfigArguments {
  bool show = false;
  bool force = false;
  std::optional<std::string> mixed_precision;
  std::optional<std::string> config_file;
};

/// `accelerate-hpc convert <checkpoint> --to safetensors [--output DIR] [--max-shard-size SIZE]`.
struct ConvertArguments {
  std::filesystem::path checkpoint;
  std::filesystem::path output;
  std::uint64_t max_shard_size = checkpoint::SaveModelOptions{}.max_shard_size;
};

/// `accelerate-hpc inspect <checkpoint>`.
struct InspectArguments {
  std::filesystem::path checkpoint;
};

/// The sub-commands' applications; each writes what it parses into `out`,
/// which must outlive it. Options take "--name value" and "--name=value";
/// config's options also take Accelerate's underscore spelling.
std::unique_ptr<CLI::App> env_app();
std::unique_ptr<CLI::App> config_app(ConfigArguments& out);
std::unique_ptr<CLI::App> inspect_app(InspectArguments& out);
std::unique_ptr<CLI::App> convert_app(ConvertArguments& out);
/// The top-level application: the sub-commands by name, for --help and completion.
std::unique_ptr<CLI::App> tool_app();

/// Runs `app` on `args` (program arguments, without the sub-command's name).
/// Returns nullopt when parsed; otherwise what to exit with after printing
/// (0 after --help, 2 after a usage error, which names the problem).
std::optional<int> parse_or_report(CLI::App& app, std::span<const std::string_view> args, std::string_view usage = {});

/// "5GB" -> 5e9, "2GiB" -> 2^31, "123" -> 123 (Accelerate's convention:
/// KB/MB/GB/TB are powers of ten, KiB/MiB/GiB powers of two); nullopt if malformed or 0.
std::optional<std::uint64_t> parse_size(std::string_view text);

/// What CLI11 cannot check: 'show' takes only --config_file. Nullopt when fine.
std::optional<std::string> config_arguments_problem(const ConfigArguments& options);

/// Fills `options` from `args` silently; returns the usage error, or nullopt.
std::optional<std::string> parse_config_arguments(std::span<const std::string_view> args, ConfigArguments& options);

/// The one-line usage of convert, printed after its usage errors.
std::string_view convert_usage();
/// Fills in convert's default output: <checkpoint>-safetensors beside it.
void default_convert_output(ConvertArguments& parsed);

/// The arguments of convert; prints the problem and the usage to std::cerr and
/// returns nullopt on a usage error (or after --help).
std::optional<ConvertArguments> parse_convert_arguments(std::span<const std::string_view> args);

/// A bash completion script for accelerate-hpc, generated from the applications.
std::string bash_completion();

}  // namespace accelerate::cli
