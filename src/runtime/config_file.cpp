#include "accelerate/runtime/config_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "accelerate/error.hpp"
#include "detail/ascii.hpp"
#include "accelerate/runtime/mixed_precision.hpp"
#include "accelerate/runtime/availability.hpp"
#include "accelerate/runtime/environment.hpp"

namespace accelerate {
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------- location

std::optional<std::string> non_empty_env(const char* name) {
  std::optional<std::string> value = get_env(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

// "~" and "~/x" become $HOME and $HOME/x, as Python's expanduser does for HF_HOME.
fs::path expand_home(const std::string& text, const char* variable) {
  if (text.empty() || text[0] != '~' || (text.size() > 1 && text[1] != '/')) return fs::path(text);
  const std::optional<std::string> home = non_empty_env("HOME");
  if (!home) {
    throw ConfigError(std::string(variable) + "='" + text +
                      "' starts with '~' but HOME is not set. Write the path out in full.");
  }
  return fs::path(*home + text.substr(1));
}

// ---------------------------------------------------------------- parsing

// Everything a parse error needs to say where it happened.
struct Position {
  const fs::path& source;
  int line;
};

[[noreturn]] void fail_at(const Position& at, std::string_view key, const std::string& problem) {
  std::string message = "config file '" + at.source.string() + "', line " + std::to_string(at.line);
  if (!key.empty()) message += ", key '" + std::string(key) + "'";
  message += ": " + problem;
  throw ConfigError(message);
}

// A top-level value as the typed readers below see it. yaml-cpp has parsed
// the YAML (quotes, escapes, comments, block scalars); `quoted` keeps what
// YAML's tags say, so that 'true' stays a string where a boolean is wanted.
struct Scalar {
  std::string text;
  bool quoted = false;
};

std::string_view trim(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

// --- typed values; each failure names the value and what is accepted.

bool to_bool(const Scalar& value, const Position& at, std::string_view key) {
  // YAML 1.2 true/false plus the yes/no/on/off that YAML 1.1 (PyYAML) and
  // the ACCELERATE_* variables also take.
  const std::string word = detail::ascii_lower(value.text);
  if (!value.quoted) {
    if (word == "true" || word == "yes" || word == "on") return true;
    if (word == "false" || word == "no" || word == "off") return false;
  }
  std::string problem = "'" + value.text + "' is not a boolean";
  if (value.quoted) problem += " (it is quoted, which makes it a string)";
  fail_at(at, key, problem + ". Write true or false, without quotes.");
}

long long to_int(const Scalar& value, long long min, long long max, const Position& at, std::string_view key) {
  const std::string range = std::to_string(min) + " … " + std::to_string(max);
  std::string_view digits = value.text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  long long number = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
  if (value.quoted || digits.empty() || error == std::errc::invalid_argument || end != digits.data() + digits.size()) {
    std::string problem = "'" + value.text + "' is not an integer";
    if (value.quoted) problem += " (it is quoted, which makes it a string)";
    fail_at(at, key, problem + ". Write a whole number in " + range + ", without quotes.");
  }
  if (error == std::errc::result_out_of_range || number < min || number > max) {
    fail_at(at, key, "'" + value.text + "' is out of range. Accepted: " + range + ".");
  }
  return number;
}

std::string to_choice(const Scalar& value, const std::vector<std::string_view>& choices, const Position& at,
                      std::string_view key) {
  std::string word = detail::ascii_lower(trim(value.text));
  for (std::string_view choice : choices) {
    if (word == choice) return word;
  }
  std::string accepted;
  for (std::string_view choice : choices) accepted += (accepted.empty() ? "" : ", ") + std::string(choice);
  fail_at(at, key, "'" + value.text + "' is not accepted. Use one of: " + accepted + ".");
}

std::string to_mixed_precision(const Scalar& value, const Position& at, std::string_view key) {
  try {
    return std::string(to_string(parse_mixed_precision(value.text)));
  } catch (const ConfigError&) {
    fail_at(at, key,
            "'" + value.text +
                "' is not a mixed-precision mode. Use one of: no, fp16, bf16 (fp8 is not "
                "supported).");
  }
}

// The ranges match EnvConfig::from_environment, so the file and the
// environment accept the same values.
constexpr long long kMaxSteps = 1LL << 30;
constexpr long long kMaxTimeoutSeconds = 7LL * 24 * 3600;
constexpr long long kMaxEmulatedRanks = 1LL << 20;

// The keys this library reads.
constexpr std::string_view kKnownKeys[] = {"mixed_precision",
                                           "use_cpu",
                                           "debug",
                                           "enable_cpu_affinity",
                                           "gradient_accumulation_steps",
                                           "log_level",
                                           "timeout",
                                           "mpi_thread_level",
                                           "emulated_ranks_per_node"};

// The other top-level keys of Python Accelerate's configuration files: every
// field of ClusterConfig and SageMakerConfig in some release (fp16 and
// dynamo_backend from early ones, which later ones still convert). They
// describe a launch that MPI or the scheduler decides here, so they are
// accepted and reported, and their values (nested sections included) are not
// read.
constexpr std::string_view kIgnoredKeys[] = {"compute_environment",
                                             "distributed_type",
                                             "num_processes",
                                             "machine_rank",
                                             "num_machines",
                                             "gpu_ids",
                                             "main_process_ip",
                                             "main_process_port",
                                             "rdzv_backend",
                                             "same_network",
                                             "main_training_function",
                                             "downcast_bf16",
                                             "fp8_config",
                                             "deepspeed_config",
                                             "fsdp_config",
                                             "parallelism_config",
                                             "tp_config",
                                             "megatron_lm_config",
                                             "ipex_config",
                                             "mpirun_config",
                                             "dynamo_config",
                                             "tpu_name",
                                             "tpu_zone",
                                             "tpu_use_cluster",
                                             "tpu_use_sudo",
                                             "command_file",
                                             "commands",
                                             "tpu_vm",
                                             "tpu_env",
                                             "ec2_instance_type",
                                             "iam_role_name",
                                             "image_uri",
                                             "profile",
                                             "region",
                                             "base_job_name",
                                             "pytorch_version",
                                             "transformers_version",
                                             "py_version",
                                             "sagemaker_inputs_file",
                                             "sagemaker_metrics_file",
                                             "additional_args",
                                             "fp16",
                                             "dynamo_backend"};

bool is_known_key(std::string_view key) {
  return std::find(std::begin(kKnownKeys), std::end(kKnownKeys), key) != std::end(kKnownKeys);
}

bool is_ignored_key(std::string_view key) {
  return std::find(std::begin(kIgnoredKeys), std::end(kIgnoredKeys), key) != std::end(kIgnoredKeys);
}

// Edits (insertions, deletions, substitutions, swaps of neighbours) between
// two keys, ignoring case: the optimal string alignment distance, in three
// rows of the table.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::string x = detail::ascii_lower(a);
  const std::string y = detail::ascii_lower(b);
  std::vector<std::size_t> before(y.size() + 1);    // row i - 2
  std::vector<std::size_t> previous(y.size() + 1);  // row i - 1
  std::vector<std::size_t> current(y.size() + 1);
  for (std::size_t j = 0; j <= y.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= x.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= y.size(); ++j) {
      const std::size_t cost = x[i - 1] == y[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && x[i - 1] == y[j - 2] && x[i - 2] == y[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[y.size()];
}

// Longest key for which a suggestion is computed: a typo is never longer,
// and the table grows with the key (a file may be 1 MiB).
constexpr std::size_t kMaxSuggestedKeyLength = 64;

// The known key (read or ignored) nearest to `key`; the first of equals, the
// keys this library reads coming first.
std::string_view nearest_known_key(std::string_view key) {
  std::string_view best = kKnownKeys[0];
  std::size_t best_distance = edit_distance(key, best);
  const auto consider = [&](std::string_view candidate) {
    const std::size_t distance = edit_distance(key, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  };
  for (std::string_view candidate : kKnownKeys) consider(candidate);
  for (std::string_view candidate : kIgnoredKeys) consider(candidate);
  return best;
}

std::string unknown_key_problem(std::string_view key) {
  std::string problem = "this key is not known";
  problem += key.size() <= kMaxSuggestedKeyLength ? "; did you mean '" + std::string(nearest_known_key(key)) + "'?"
                                                  : std::string(".");
  return problem + " Correct the name or remove the line (docs/configuration.md lists every key).";
}

// YAML forbids tabs in indentation; yaml-cpp accepts some of them, and reads
// the line as something else than was meant. A tab in the leading white space
// of a line that holds more than a comment is an error, except in the text of
// a block scalar ('|' or '>'), where it follows the spaces of the indentation.
bool opens_block_scalar(std::string_view rest) {
  for (std::size_t at = 0; (at = rest.find('#', at)) != std::string_view::npos; ++at) {
    if (at == 0 || rest[at - 1] == ' ' || rest[at - 1] == '\t') {
      rest = rest.substr(0, at);
      break;
    }
  }
  rest = trim(rest);
  const std::size_t blank = rest.find_last_of(" \t");
  const std::string_view indicator = blank == std::string_view::npos ? rest : rest.substr(blank + 1);
  if (indicator.empty() || (indicator.front() != '|' && indicator.front() != '>') ||
      indicator.find_first_not_of("+-0123456789", 1) != std::string_view::npos) {
    return false;
  }
  const std::string_view before = blank == std::string_view::npos ? std::string_view() : trim(rest.substr(0, blank));
  return before.empty() || before.back() == ':' || before.back() == '-';
}

void reject_tab_indentation(std::string_view text, const fs::path& source) {
  std::ptrdiff_t block_indent = -1;  // indentation of the line that opened a block scalar, while in it
  int line_number = 0;
  for (std::size_t start = 0; start < text.size() || line_number == 0;) {
    ++line_number;
    // Lines end with "\n", "\r\n" or a lone "\r", as YAML counts them.
    const std::size_t newline = std::min(text.find_first_of("\r\n", start), text.size());
    const std::string_view line = text.substr(start, newline - start);
    start = newline + (text.substr(newline, 2) == "\r\n" ? 2 : 1);
    const std::size_t spaces = std::min(line.find_first_not_of(' '), line.size());
    const std::size_t white = std::min(line.find_first_not_of(" \t"), line.size());
    const std::string_view rest = line.substr(white);
    if (block_indent >= 0) {
      if (rest.empty() || static_cast<std::ptrdiff_t>(spaces) > block_indent) continue;
      block_indent = -1;
    }
    if (rest.empty() || rest.front() == '#') continue;
    if (white > spaces) {
      fail_at({source, line_number}, "",
              "the line is indented with a tab, which YAML does not allow (only spaces indent). Replace the tab "
              "with spaces.");
    }
    if (opens_block_scalar(rest)) block_indent = static_cast<std::ptrdiff_t>(spaces);
  }
}

// Stores the value of a known key (false for an unknown key).
bool assign(ConfigFile& config, std::string_view key, const Scalar& value, const Position& at) {
  if (key == "mixed_precision") {
    config.mixed_precision = to_mixed_precision(value, at, key);
  } else if (key == "use_cpu") {
    config.use_cpu = to_bool(value, at, key);
  } else if (key == "debug") {
    config.debug_mode = to_bool(value, at, key);
  } else if (key == "enable_cpu_affinity") {
    config.cpu_affinity = to_bool(value, at, key);
  } else if (key == "gradient_accumulation_steps") {
    config.gradient_accumulation_steps = static_cast<int>(to_int(value, 1, kMaxSteps, at, key));
  } else if (key == "log_level") {
    config.log_level = to_choice(value, {"debug", "info", "warning", "error"}, at, key);
  } else if (key == "timeout") {
    config.timeout = std::chrono::seconds(to_int(value, 1, kMaxTimeoutSeconds, at, key));
  } else if (key == "mpi_thread_level") {
    config.mpi_thread_level = to_choice(value, {"single", "funneled", "serialized", "multiple"}, at, key);
  } else if (key == "emulated_ranks_per_node") {
    config.emulated_ranks_per_node = static_cast<int>(to_int(value, 1, kMaxEmulatedRanks, at, key));
  } else {
    return false;
  }
  return true;
}

// A top-level key of this file: what `accelerate config` (ours and Python
// Accelerate's) writes. Anything else is most likely a typo such as
// "use_cpu:true" (no blank), which YAML would read as a key of its own.
bool is_key(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
  });
}

// yaml-cpp counts lines from 0; people and editors from 1.
int line_of(const YAML::Node& node) { return node.Mark().is_null() ? 0 : node.Mark().line + 1; }

// Records where each document starts; the nodes themselves come from YAML::Load.
class DocumentStarts final : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// One document, read to its end. Not YAML::LoadAll: on some malformed text
// (a ',' before the first node) yaml-cpp 0.7 reports document after document
// without moving on, so LoadAll never returns. Two steps of the parser tell
// a second document from text it cannot get past.
void expect_one_document(const std::string& yaml, const fs::path& source) {
  std::istringstream stream(yaml);
  YAML::Parser parser(stream);
  DocumentStarts documents;
  if (!parser.HandleNextDocument(documents) || !parser.HandleNextDocument(documents)) return;
  if (documents.starts.size() < 2) return;
  const YAML::Mark& second = documents.starts[1];
  if (second.pos == documents.starts[0].pos) {
    fail_at({source, second.line + 1}, "",
            "this is not valid YAML (the parser cannot read past this point). Check for a stray ',', '[' or "
            "'{' at the start of the file.");
  }
  fail_at({source, second.line + 1}, "",
          "a second YAML document starts here ('---'). A configuration file holds one document.");
}

[[noreturn]] void fail_yaml(const fs::path& source, const YAML::Exception& error) {
  const std::string problem = "this is not valid YAML (" + error.msg +
                              "). Check the quotes, colons and indentation on this line and the one before.";
  if (error.mark.is_null()) {
    throw ConfigError("config file '" + source.string() + "': " + problem);
  }
  fail_at({source, error.mark.line + 1}, "", problem);
}

// ---------------------------------------------------------------- writing

std::string quote(std::string_view text) {
  std::string result = "'";
  for (char c : text) result += (c == '\'') ? std::string("''") : std::string(1, c);
  return result + "'";
}

[[noreturn]] void fail_io(const std::string& what, const fs::path& path, int error) {
  throw ConfigError("config file: cannot " + what + " '" + path.string() + "': " + std::strerror(error) +
                    ". Check the directory's permissions, or choose another " +
                    "location (--config_file or ACCELERATE_CONFIG_FILE).");
}

// Writes `text` to a fresh temporary file beside `path` and flushes it to disk.
fs::path write_temporary(const std::string& text, const fs::path& path) {
  static std::atomic<unsigned> counter{0};
  const fs::path directory = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) fail_io("create the directory of", path, error.value());
  fs::path temporary = directory / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                                    std::to_string(counter++));
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail_io("create a temporary file for", path, errno);
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      ::unlink(temporary.c_str());
      fail_io("write", temporary, saved);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    fail_io("flush", temporary, saved);
  }
  return temporary;
}

}  // namespace

// ==================================================================== public

ConfigFileLocation locate_default_config_file() {
  if (auto file = non_empty_env("ACCELERATE_CONFIG_FILE")) {
    return {expand_home(*file, "ACCELERATE_CONFIG_FILE"), "ACCELERATE_CONFIG_FILE"};
  }
  const fs::path name{std::string(kDefaultConfigFileName)};
  if (auto hf_home = non_empty_env("HF_HOME")) {
    return {expand_home(*hf_home, "HF_HOME") / "accelerate" / name, "HF_HOME"};
  }
  if (auto cache = non_empty_env("XDG_CACHE_HOME")) {
    return {expand_home(*cache, "XDG_CACHE_HOME") / "huggingface" / "accelerate" / name, "XDG_CACHE_HOME"};
  }
  if (auto home = non_empty_env("HOME")) {
    return {fs::path(*home) / ".cache" / "huggingface" / "accelerate" / name, "HOME"};
  }
  throw ConfigError(
      "config file: none of ACCELERATE_CONFIG_FILE, HF_HOME, XDG_CACHE_HOME and HOME is set, so "
      "there is no default location. Set ACCELERATE_CONFIG_FILE to the file's path.");
}

fs::path default_config_file() { return locate_default_config_file().path; }

ConfigFile parse_config_file(std::string_view text, const fs::path& source) {
  ConfigFile config;
  config.source = source;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte-order mark

  const std::string yaml(text);
  YAML::Node top;
  reject_tab_indentation(text, source);
  try {
    expect_one_document(yaml, source);
    top = YAML::Load(yaml);
  } catch (const YAML::Exception& error) {
    fail_yaml(source, error);
  }
  if (top.IsNull()) return config;  // empty, or comments only
  if (!top.IsMap()) {
    fail_at({source, line_of(top)}, "",
            std::string("the file holds ") + (top.IsSequence() ? "a list" : "the plain value '" + top.Scalar() + "'") +
                " where 'key: value' lines belong. Write one 'key: value' per line at the start of the line "
                "(a blank after the colon).");
  }

  std::map<std::string, int, std::less<>> seen;  // key -> line: duplicates are errors
  try {
    for (const auto& item : top) {
      const YAML::Node& key_node = item.first;
      const YAML::Node& value_node = item.second;
      const Position key_at{source, line_of(key_node)};
      if (!key_node.IsScalar() || !is_key(key_node.Scalar())) {
        fail_at(key_at, "",
                "'" + (key_node.IsScalar() ? key_node.Scalar() : std::string("a list or mapping")) +
                    "' is not a key. Keys are letters, digits, '_', '-' or '.', followed by ':' and a blank "
                    "('use_cpu: true', not 'use_cpu:true').");
      }
      const std::string& key = key_node.Scalar();
      if (const auto [previous, inserted] = seen.emplace(key, key_at.line); !inserted) {
        fail_at(key_at, key,
                "the key was already set on line " + std::to_string(previous->second) + ". Keep one of the two lines.");
      }
      if (is_ignored_key(key)) {
        // Python Accelerate's keys (distributed_type, fsdp_config, ...), nested
        // values included: kept for the Accelerator's warning, not read.
        config.unknown_keys.push_back(key);
        continue;
      }
      if (!is_known_key(key)) {
        fail_at(key_at, key, unknown_key_problem(key));
      }
      if (value_node.IsNull()) {
        fail_at(key_at, key, "the key has no value. Write a value after the colon, or remove the line.");
      }
      const Position value_at{source, line_of(value_node)};
      if (!value_node.IsScalar()) {
        fail_at(value_at, key,
                std::string("the value is a ") + (value_node.IsSequence() ? "list" : "mapping") +
                    "; this key takes one plain value.");
      }
      // YAML tags a plain scalar "?" and a quoted one "!" (or an explicit !!tag).
      assign(config, key, Scalar{value_node.Scalar(), value_node.Tag() != "?"}, value_at);
    }
  } catch (const YAML::Exception& error) {
    fail_yaml(source, error);
  }
  return config;
}

std::optional<ConfigFile> load_config_file(const fs::path& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) return std::nullopt;
  if (error) fail_io("inspect", path, error.value());
  if (fs::is_directory(status)) {
    throw ConfigError("config file '" + path.string() + "' is a directory. Name the YAML file itself.");
  }
  if (const std::uintmax_t size = fs::file_size(path, error); !error && size > kMaxConfigFileBytes) {
    throw ConfigError("config file '" + path.string() + "' is " + std::to_string(size) + " bytes, more than the " +
                      std::to_string(kMaxConfigFileBytes) +
                      " a configuration file may have. Name the YAML configuration file, not another file.");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_io("open", path, errno);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail_io("read", path, errno);
  return parse_config_file(text.str(), path);
}

ConfigFile require_config_file(const fs::path& path) {
  std::optional<ConfigFile> config = load_config_file(path);
  if (!config) {
    throw ConfigError("config file '" + path.string() +
                      "' does not exist. Create it with 'accelerate-hpc config --config_file " + path.string() +
                      "', or correct the path.");
  }
  return std::move(*config);
}

std::optional<ConfigFile> load_default_config_file() {
  const ConfigFileLocation location = locate_default_config_file();
  if (location.origin == "ACCELERATE_CONFIG_FILE") {
    std::optional<ConfigFile> config = load_config_file(location.path);
    if (!config) {
      throw ConfigError("ACCELERATE_CONFIG_FILE names '" + location.path.string() +
                        "', which does not exist. Create it with 'accelerate-hpc config', correct the path, or "
                        "unset the variable.");
    }
    return config;
  }
  return load_config_file(location.path);
}

std::vector<ConfigEntry> config_entries(const ConfigFile& config) {
  std::vector<ConfigEntry> entries;
  const auto text = [](bool value) { return std::string(value ? "true" : "false"); };
  if (config.mixed_precision) {
    entries.push_back({"mixed_precision", *config.mixed_precision, true, "ACCELERATE_MIXED_PRECISION"});
  }
  if (config.use_cpu) entries.push_back({"use_cpu", text(*config.use_cpu), false, "ACCELERATE_USE_CPU"});
  if (config.debug_mode) entries.push_back({"debug", text(*config.debug_mode), false, "ACCELERATE_DEBUG_MODE"});
  if (config.cpu_affinity) {
    entries.push_back({"enable_cpu_affinity", text(*config.cpu_affinity), false, "ACCELERATE_CPU_AFFINITY"});
  }
  if (config.gradient_accumulation_steps) {
    entries.push_back({"gradient_accumulation_steps", std::to_string(*config.gradient_accumulation_steps), false,
                       "ACCELERATE_GRADIENT_ACCUMULATION_STEPS"});
  }
  if (config.log_level) entries.push_back({"log_level", *config.log_level, true, "ACCELERATE_LOG_LEVEL"});
  if (config.timeout) {
    entries.push_back({"timeout", std::to_string(config.timeout->count()), false, "ACCELERATE_TIMEOUT"});
  }
  if (config.mpi_thread_level) {
    entries.push_back({"mpi_thread_level", *config.mpi_thread_level, true, "ACCELERATE_MPI_THREAD_LEVEL"});
  }
  if (config.emulated_ranks_per_node) {
    entries.push_back({"emulated_ranks_per_node", std::to_string(*config.emulated_ranks_per_node), false,
                       "ACCELERATE_EMULATED_RANKS_PER_NODE"});
  }
  return entries;
}

std::string to_yaml(const ConfigFile& config) {
  std::string text =
      "# Accelerate-HPC configuration (docs/configuration.md lists every key).\n"
      "# ACCELERATE_* environment variables and explicit Accelerator options take precedence.\n";
  for (const ConfigEntry& entry : config_entries(config)) {
    text += entry.key + ": " + (entry.is_string ? quote(entry.value) : entry.value) + "\n";
  }
  return text;
}

void write_config_file(const ConfigFile& config, const fs::path& path) {
  const fs::path temporary = write_temporary(to_yaml(config), path);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    fail_io("replace", path, saved);
  }
}

ConfigFile basic_config(std::string_view mixed_precision) {
  ConfigFile config;
  try {
    config.mixed_precision = std::string(to_string(parse_mixed_precision(mixed_precision)));
  } catch (const ConfigError&) {
    throw ConfigError("write_basic_config: mixed_precision '" + std::string(mixed_precision) +
                      "' is not accepted. Use one of: no, fp16, bf16 (fp8 is not supported).");
  }
  config.use_cpu = !is_cuda_available();
  return config;
}

bool write_basic_config(std::string_view mixed_precision, const fs::path& save_location) {
  const ConfigFile config = basic_config(mixed_precision);
  const fs::path temporary = write_temporary(to_yaml(config), save_location);
  // link() fails with EEXIST instead of replacing: the existence check and
  // the write are one step, so two ranks running this at once cannot clobber.
  if (::link(temporary.c_str(), save_location.c_str()) == 0) {
    ::unlink(temporary.c_str());
    return true;
  }
  const int saved = errno;
  if (saved == EEXIST) {
    ::unlink(temporary.c_str());
    return false;
  }
  if (saved == EPERM || saved == EOPNOTSUPP || saved == ENOSYS) {
    // File systems without hard links: check, then rename (not atomic, but
    // the rename itself still never leaves a half-written file).
    std::error_code error;
    if (fs::exists(save_location, error)) {
      ::unlink(temporary.c_str());
      return false;
    }
    if (::rename(temporary.c_str(), save_location.c_str()) == 0) return true;
    const int rename_error = errno;
    ::unlink(temporary.c_str());
    fail_io("create", save_location, rename_error);
  }
  ::unlink(temporary.c_str());
  fail_io("create", save_location, saved);
}

}  // namespace accelerate
