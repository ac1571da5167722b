// The configuration file (seeds: `accelerate config`, write_basic_config):
// a flat YAML file whose keys are the settings of the ACCELERATE_* variables
// (runtime/env_config.hpp), under Accelerate's YAML names where it has them.
// docs/configuration.md documents the location, every key and the precedence
//
//   explicit Accelerator option > ACCELERATE_* variable > this file > built-in default.
//
// Plain C++: no LibTorch, no MPI calls (the CLI uses it before MPI exists).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accelerate {

/// The settings a configuration file can hold. A field is set only when its
/// key appears in the file; unset fields leave the decision to the default.
/// Field names follow EnvConfig so the two merge field by field.
struct ConfigFile {
  std::optional<std::string> mixed_precision;      ///< `mixed_precision`: "no" | "fp16" | "bf16" (lower case)
  std::optional<bool> use_cpu;                     ///< `use_cpu`
  std::optional<bool> debug_mode;                  ///< `debug` (ACCELERATE_DEBUG_MODE)
  std::optional<bool> cpu_affinity;                ///< `enable_cpu_affinity` (ACCELERATE_CPU_AFFINITY)
  std::optional<int> gradient_accumulation_steps;  ///< `gradient_accumulation_steps`: ≥ 1
  std::optional<std::string> log_level;            ///< `log_level`: debug | info | warning | error
  std::optional<std::chrono::seconds> timeout;     ///< `timeout`: seconds, 1 … 604800
  std::optional<std::string> mpi_thread_level;     ///< `mpi_thread_level`: single | funneled | serialized | multiple
  std::optional<int> emulated_ranks_per_node;      ///< `emulated_ranks_per_node`: ≥ 1

  /// Top-level keys of Python Accelerate's files that this library accepts
  /// but does not read (e.g. `distributed_type`, `num_processes`,
  /// `fsdp_config`), in file order; the Accelerator warns about them. Any
  /// other key is a ConfigError.
  std::vector<std::string> unknown_keys;

  /// The file the values came from; empty for a ConfigFile built in code.
  std::filesystem::path source;

  friend bool operator==(const ConfigFile&, const ConfigFile&) = default;
};

/// One set key of a ConfigFile, for display and writing.
struct ConfigEntry {
  std::string key;           ///< YAML key, e.g. "debug"
  std::string value;         ///< the value as text, unquoted: "bf16", "true", "1800"
  bool is_string = false;    ///< written quoted
  std::string env_variable;  ///< the ACCELERATE_* variable of the same setting
};

/// The set keys of `config`, in the order the file documents them.
std::vector<ConfigEntry> config_entries(const ConfigFile& config);

/// Where the default file is and which variable decided it.
struct ConfigFileLocation {
  std::filesystem::path path;
  std::string origin;  ///< "ACCELERATE_CONFIG_FILE", "HF_HOME", "XDG_CACHE_HOME" or "HOME"
};

/// File name of the default configuration, distinct from Python Accelerate's
/// default_config.yaml so that neither tool rejects or overwrites the other's file.
inline constexpr std::string_view kDefaultConfigFileName = "accelerate_hpc_config.yaml";

/// The first that is set (and non-empty) of:
///   $ACCELERATE_CONFIG_FILE
///   $HF_HOME/accelerate/accelerate_hpc_config.yaml
///   $XDG_CACHE_HOME/huggingface/accelerate/accelerate_hpc_config.yaml
///   $HOME/.cache/huggingface/accelerate/accelerate_hpc_config.yaml
/// A leading "~" is expanded with $HOME. ConfigError when none is set.
ConfigFileLocation locate_default_config_file();

/// locate_default_config_file().path.
std::filesystem::path default_config_file();

/// Parses the text of a configuration file. `source` names the file in error
/// messages (and becomes ConfigFile::source). A malformed line, a line
/// indented with a tab, an unknown key (the message suggests the nearest
/// known one) or an invalid value throws ConfigError naming the file, the
/// line, the key and what is accepted.
ConfigFile parse_config_file(std::string_view text, const std::filesystem::path& source);

/// Largest configuration file load_config_file reads (a real one is a few hundred bytes).
inline constexpr std::uintmax_t kMaxConfigFileBytes = 1U << 20;

/// Reads and parses `path`; nullopt when the file does not exist. An existing
/// file that cannot be read or parsed throws ConfigError.
std::optional<ConfigFile> load_config_file(const std::filesystem::path& path);

/// Like load_config_file, but a missing file is a ConfigError too: for a
/// file the user named (an option, ACCELERATE_CONFIG_FILE).
ConfigFile require_config_file(const std::filesystem::path& path);

/// The default file: nullopt when it does not exist at the default location.
/// When ACCELERATE_CONFIG_FILE names it, it must exist (a typo in the
/// variable would otherwise be ignored silently): ConfigError if it does not.
std::optional<ConfigFile> load_default_config_file();

/// The YAML text write_config_file writes: a header comment, then every set
/// key (strings quoted, so that a YAML 1.1 reader such as PyYAML reads `'no'`
/// as a string, not as false). Unknown keys are not written (their values
/// are not kept).
std::string to_yaml(const ConfigFile& config);

/// Writes `config` to `path` atomically (a temporary file in the same
/// directory, flushed to disk, then renamed over `path`), creating missing
/// parent directories. Replaces an existing file. Failures throw ConfigError.
void write_config_file(const ConfigFile& config, const std::filesystem::path& path);

/// The configuration write_basic_config writes: `mixed_precision` plus
/// `use_cpu` (true when no CUDA device is visible, false otherwise).
/// An invalid mixed_precision throws ConfigError.
ConfigFile basic_config(std::string_view mixed_precision = "no");

/// Accelerate's write_basic_config: writes basic_config(mixed_precision) to
/// `save_location` unless a file is already there. Returns true when it
/// wrote the file, false when one existed (left untouched, as Accelerate
/// does). The check and the write are one atomic step (a hard link), so
/// concurrent callers never overwrite each other. An invalid mixed_precision
/// throws ConfigError before anything is touched.
bool write_basic_config(std::string_view mixed_precision = "no",
                        const std::filesystem::path& save_location = default_config_file());

}  // namespace accelerate
