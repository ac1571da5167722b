// The accelerate-hpc command line on CLI11 (see arguments.hpp).
#include "cli/arguments.hpp"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <system_error>

#include "detail/byte_size.hpp"

namespace accelerate::cli {

namespace fs = std::filesystem;

namespace {

// The values some options take: the validators and the completion script both read them.
const std::vector<std::string> kMixedPrecisionValues{"no", "fp16", "bf16"};
const std::vector<std::string> kConvertFormats{"safetensors"};

constexpr std::string_view kConvertUsage =
    "usage: accelerate-hpc convert <checkpoint directory or state file> --to safetensors\n"
    "                              [--output DIR] [--max-shard-size SIZE]\n";

std::string format_error(const std::string& value) {
  if (std::find(kConvertFormats.begin(), kConvertFormats.end(), value) != kConvertFormats.end()) return {};
  return "unknown format '" + value + "' for --to; the supported format is 'safetensors'";
}

// CLI11 puts the option's name in front of the message.
std::string size_error(const std::string& value) {
  const detail::ByteSizeReading size = detail::read_byte_size(value);
  if (!size.bytes) return size.error;
  if (*size.bytes == 0) return "'" + value + "' is not a shard size: a shard holds at least 1 byte";
  return {};
}

}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view text) {
  const std::optional<std::int64_t> bytes = detail::read_byte_size(text).bytes;
  if (!bytes || *bytes == 0) return std::nullopt;
  return static_cast<std::uint64_t>(*bytes);
}

std::unique_ptr<CLI::App> env_app() {
  return std::make_unique<CLI::App>("Print versions, enabled features and, under mpirun or srun, one line per rank.",
                                    "accelerate-hpc env");
}

std::unique_ptr<CLI::App> config_app(ConfigArguments& out) {
  auto app = std::make_unique<CLI::App>(
      "Write the default configuration file the Accelerator reads (never over an existing one without --force).",
      "accelerate-hpc config");
  app->add_flag_function(
      "--force", [&out](std::int64_t) { out.force = true; }, "replace an existing file");
  // Accelerate's launcher spells options with underscores; the dashed form works too.
  app->add_option_function<std::string>(
         "--mixed_precision,--mixed-precision", [&out](const std::string& value) { out.mixed_precision = value; },
         "no, fp16 or bf16")
      ->transform(CLI::IsMember(kMixedPrecisionValues, CLI::ignore_case));
  app->add_option_function<std::string>(
         "--config_file,--config-file", [&out](const std::string& value) { out.config_file = value; },
         "the file to write or show (default: $ACCELERATE_CONFIG_FILE, else under $HF_HOME)")
      ->check([](const std::string& value) { return value.empty() ? std::string("needs a path") : std::string(); });
  app->footer(
      "Without a sub-command: write a basic configuration (the mixed-precision mode, and use_cpu: true when no "
      "GPU is visible).\nDefault location: $ACCELERATE_CONFIG_FILE, else $HF_HOME/accelerate/, else "
      "$XDG_CACHE_HOME/huggingface/accelerate/, else ~/.cache/huggingface/accelerate/, file "
      "accelerate_hpc_config.yaml.");
  CLI::App* show = app->add_subcommand("show", "print the configuration file and what overrides it");
  show->fallthrough();  // `config show --config_file F`: the option belongs to config
  show->callback([&out] { out.show = true; });
  return app;
}

std::unique_ptr<CLI::App> inspect_app(InspectArguments& out) {
  auto app = std::make_unique<CLI::App>(
      "Summarise a checkpoint (step, world size, datasets, bytes) and verify every checksum.",
      "accelerate-hpc inspect");
  app->add_option_function<std::string>(
         "checkpoint", [&out](const std::string& value) { out.checkpoint = value; },
         "checkpoint directory or state file")
      ->required();
  return app;
}

std::unique_ptr<CLI::App> convert_app(ConvertArguments& out) {
  auto app = std::make_unique<CLI::App>("Export the model of a checkpoint.", "accelerate-hpc convert");
  app->add_option_function<std::string>(
         "checkpoint", [&out](const std::string& value) { out.checkpoint = value; },
         "checkpoint directory or state file")
      ->required();
  app->add_option("--to", "the format to write: safetensors")->required()->check(format_error);
  app->add_option_function<std::string>(
      "--output", [&out](const std::string& value) { out.output = value; },
      "directory for the model files (default: <checkpoint>-safetensors beside it)");
  app->add_option_function<std::string>(
         "--max-shard-size,--max_shard_size",
         [&out](const std::string& value) { out.max_shard_size = parse_size(value).value_or(out.max_shard_size); },
         "largest shard, e.g. 5GB, 500MB, 2GiB or bytes (default 10GB)")
      ->check(size_error);
  return app;
}

std::unique_ptr<CLI::App> tool_app() {
  auto app = std::make_unique<CLI::App>("The Accelerate-HPC command-line tool.", "accelerate-hpc");
  app->add_subcommand("env", "print versions, enabled features and, under mpirun/srun, one line per rank");
  app->add_subcommand("config", "write (or show) the default configuration file the Accelerator reads");
  app->add_subcommand("inspect", "<checkpoint>: step, world size, datasets, bytes, and a checksum verification");
  app->add_subcommand("convert", "<checkpoint> --to safetensors: export the model of a checkpoint");
  app->add_subcommand("completion",
                      "bash: print a bash completion script (source it, or install it as "
                      "/etc/bash_completion.d/accelerate-hpc)");
  app->add_subcommand("help", "print this message");
  return app;
}

std::optional<int> parse_or_report(CLI::App& app, std::span<const std::string_view> args, std::string_view usage) {
  // CLI11 takes the arguments last first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
    return std::nullopt;
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& error) {
    std::cerr << app.get_name() << ": " << error.what() << "\n"
              << usage << "run '" << app.get_name() << " --help' for the options\n";
    return 2;
  } catch (const std::exception& error) {  // a converter's own exception: still a usage error
    std::cerr << app.get_name() << ": " << error.what() << "\n" << usage;
    return 2;
  }
}

std::optional<std::string> parse_config_arguments(std::span<const std::string_view> args, ConfigArguments& options) {
  auto app = config_app(options);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app->parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return std::string("--help asks for the help, not for a configuration");
  } catch (const CLI::ParseError& error) {
    return std::string(error.what());
  } catch (const std::exception& error) {
    return std::string(error.what());
  }
  return config_arguments_problem(options);
}

std::optional<std::string> config_arguments_problem(const ConfigArguments& options) {
  if (options.show && (options.force || options.mixed_precision)) return "'show' takes only --config_file";
  return std::nullopt;
}

std::string_view convert_usage() { return kConvertUsage; }

void default_convert_output(ConvertArguments& parsed) {
  if (!parsed.output.empty()) return;
  fs::path base = parsed.checkpoint;
  if (!base.has_filename()) base = base.parent_path();  // "dir/" -> "dir"
  std::error_code unreadable;  // a name the file system refuses is reported when convert opens it
  if (fs::is_regular_file(base, unreadable)) base.replace_extension();
  parsed.output = base.string() + "-safetensors";
}

std::optional<ConvertArguments> parse_convert_arguments(std::span<const std::string_view> args) {
  ConvertArguments parsed;
  auto app = convert_app(parsed);
  if (parse_or_report(*app, args, kConvertUsage)) return std::nullopt;
  default_convert_output(parsed);
  return parsed;
}

namespace {

// Every long name of the options and the sub-commands of `app`, dashed.
std::string words_of(const CLI::App& app) {
  std::string words;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) words += " --" + name;
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) words += " " + sub->get_name();
  return words.empty() ? words : words.substr(1);
}

std::string joined(const std::vector<std::string>& values) {
  std::string out;
  for (const auto& value : values) out += (out.empty() ? "" : " ") + value;
  return out;
}

}  // namespace

std::string bash_completion() {
  ConfigArguments config;
  InspectArguments inspect;
  ConvertArguments convert;
  const auto tool = tool_app();
  std::ostringstream script;
  script << "# bash completion for accelerate-hpc, generated by `accelerate-hpc completion bash`.\n"
         << "_accelerate_hpc() {\n"
         << "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} words=\n"
         << "  if [[ $COMP_CWORD -eq 1 ]]; then\n"
         << "    COMPREPLY=($(compgen -W \"" << words_of(*tool) << "\" -- \"$cur\"))\n"
         << "    return\n"
         << "  fi\n"
         << "  case $prev in\n"
         << "    --mixed_precision|--mixed-precision) COMPREPLY=($(compgen -W \"" << joined(kMixedPrecisionValues)
         << "\" -- \"$cur\")); return ;;\n"
         << "    --to) COMPREPLY=($(compgen -W \"" << joined(kConvertFormats) << "\" -- \"$cur\")); return ;;\n"
         << "  esac\n"
         << "  case ${COMP_WORDS[1]} in\n"
         << "    env) words=\"" << words_of(*env_app()) << "\" ;;\n"
         << "    config) words=\"" << words_of(*config_app(config)) << "\" ;;\n"
         << "    inspect) words=\"" << words_of(*inspect_app(inspect)) << "\" ;;\n"
         << "    convert) words=\"" << words_of(*convert_app(convert)) << "\" ;;\n"
         << "    completion) COMPREPLY=($(compgen -W \"bash\" -- \"$cur\")); return ;;\n"
         << "  esac\n"
         << "  if [[ $cur == -* || ${COMP_WORDS[1]} == config ]]; then\n"
         << "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
         << "  else\n"
         << "    COMPREPLY=($(compgen -f -- \"$cur\"))  # checkpoints are paths\n"
         << "  fi\n"
         << "}\n"
         << "complete -o filenames -F _accelerate_hpc accelerate-hpc\n";
  return script.str();
}

}  // namespace accelerate::cli
