// `accelerate-hpc config`: writes the basic configuration file (Accelerate's
// write_basic_config), or shows one. Non-interactive, so it runs unchanged in
// a batch job; it needs neither MPI nor a launcher.
#include <cctype>
#include <iostream>
#include <optional>
#include <string>

#include "accelerate/error.hpp"
#include "accelerate/runtime/config_file.hpp"
#include "accelerate/runtime/environment.hpp"
#include "cli/arguments.hpp"
#include "cli/commands.hpp"

namespace accelerate::cli {
namespace {

int usage_error(const std::string& message) {
  std::cerr << "accelerate-hpc config: " << message << "\nrun 'accelerate-hpc config --help' for the options\n";
  return 2;
}

int show(const ConfigArguments& options) {
  ConfigFileLocation location;
  if (options.config_file) {
    location = {*options.config_file, "--config_file"};
  } else {
    location = locate_default_config_file();
  }
  std::cout << "config file: " << location.path.string() << " (from " << location.origin << ")\n";
  const std::optional<ConfigFile> config = load_config_file(location.path);
  if (!config) {
    // A path the user named must exist; the default location need not.
    if (location.origin == "--config_file" || location.origin == "ACCELERATE_CONFIG_FILE") {
      std::cout << "status: does not exist\n";
      std::cerr << "accelerate-hpc config: " << location.path.string() << ", named by " << location.origin
                << ", does not exist. Create it with 'accelerate-hpc config', or correct the path.\n";
      return 1;
    }
    std::cout << "status: does not exist (built-in defaults apply; 'accelerate-hpc config' creates it)\n";
    return 0;
  }
  const std::vector<ConfigEntry> entries = config_entries(*config);
  std::cout << "status: " << entries.size() << " setting(s)\n";
  for (const ConfigEntry& entry : entries) {
    std::cout << entry.key << ": " << entry.value;
    // The environment wins over the file: say so where it happens.
    if (const std::optional<std::string> env = get_env(entry.env_variable); env && !env->empty()) {
      std::cout << "    # overridden by " << entry.env_variable << "=" << *env;
    }
    std::cout << '\n';
  }
  if (!config->unknown_keys.empty()) {
    std::cout << "unknown keys (ignored):";
    for (const std::string& key : config->unknown_keys) std::cout << ' ' << key;
    std::cout << '\n';
  }
  return 0;
}

int write(const ConfigArguments& options) {
  const std::filesystem::path path =
      options.config_file ? std::filesystem::path(*options.config_file) : default_config_file();
  const std::string mixed_precision = options.mixed_precision.value_or("no");
  if (options.force) {
    write_config_file(basic_config(mixed_precision), path);
  } else if (!write_basic_config(mixed_precision, path)) {
    // Accelerate leaves an existing file alone too; exit 0 keeps job scripts
    // that run this on every submission idempotent.
    std::cerr << "accelerate-hpc config: " << path.string()
              << " already exists and was left unchanged. Pass --force to replace it, or --config_file to "
                 "write elsewhere.\n";
    return 0;
  }
  std::cout << "accelerate-hpc config: wrote " << path.string() << '\n';
  return 0;
}

}  // namespace

int run_config(std::span<const std::string_view> args) {
  ConfigArguments options;
  const auto app = config_app(options);
  if (const std::optional<int> code = parse_or_report(*app, args)) return *code;
  if (const std::optional<std::string> problem = config_arguments_problem(options)) return usage_error(*problem);
  try {
    return options.show ? show(options) : write(options);
  } catch (const ConfigError& error) {
    // A bad file or an unwritable directory: the message says what to fix.
    std::cerr << error.what() << '\n';
    return 1;
  }
}

}  // namespace accelerate::cli
