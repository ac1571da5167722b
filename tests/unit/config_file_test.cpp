// The configuration file: parser, validation messages, default location,
// atomic writing and write_basic_config's no-overwrite rule.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "accelerate/error.hpp"
#include "accelerate/runtime/availability.hpp"
#include "accelerate/runtime/config_file.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace fs = std::filesystem;
using accelerate::ConfigError;
using accelerate::ConfigFile;

namespace {

// Sets or unsets variables for one test and restores them afterwards.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, std::optional<std::string>>> values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      if (value) {
        ::setenv(name, value->c_str(), 1);
      } else {
        ::unsetenv(name);
      }
    }
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "accelerate_config_test_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// The message of the ConfigError that parsing `text` throws ("" if none).
std::string parse_error(const std::string& text) {
  try {
    accelerate::parse_config_file(text, "/etc/cluster.yaml");
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "";
}

ConfigFile parse(const std::string& text) { return accelerate::parse_config_file(text, "test.yaml"); }

}  // namespace

TEST(ConfigFile, ParsesEveryKey) {
  const ConfigFile config = parse(
      "mixed_precision: bf16\n"
      "use_cpu: true\n"
      "debug: false\n"
      "enable_cpu_affinity: yes\n"
      "gradient_accumulation_steps: 8\n"
      "log_level: warning\n"
      "timeout: 600\n"
      "mpi_thread_level: serialized\n"
      "emulated_ranks_per_node: 2\n");
  EXPECT_EQ(config.mixed_precision, "bf16");
  EXPECT_EQ(config.use_cpu, true);
  EXPECT_EQ(config.debug_mode, false);
  EXPECT_EQ(config.cpu_affinity, true);
  EXPECT_EQ(config.gradient_accumulation_steps, 8);
  EXPECT_EQ(config.log_level, "warning");
  EXPECT_EQ(config.timeout, std::chrono::seconds(600));
  EXPECT_EQ(config.mpi_thread_level, "serialized");
  EXPECT_EQ(config.emulated_ranks_per_node, 2);
  EXPECT_TRUE(config.unknown_keys.empty());
  EXPECT_EQ(config.source, fs::path("test.yaml"));
}

TEST(ConfigFile, AbsentKeysStayUnset) {
  const ConfigFile config = parse("use_cpu: false\n");
  EXPECT_EQ(config.use_cpu, false);
  EXPECT_FALSE(config.mixed_precision);
  EXPECT_FALSE(config.debug_mode);
  EXPECT_FALSE(config.gradient_accumulation_steps);
  EXPECT_FALSE(config.timeout);
  EXPECT_TRUE(parse("").unknown_keys.empty());
  EXPECT_FALSE(parse("# only a comment\n\n").use_cpu);
}

TEST(ConfigFile, CommentsBlankLinesQuotesAndLineEndings) {
  const ConfigFile config = parse(
      "\xEF\xBB\xBF---\n"
      "# a comment line\n"
      "\n"
      "   \n"
      "mixed_precision: 'FP16'   # trailing comment\n"
      "log_level: \"debug\"  # comment after a quoted value\n"
      "use_cpu: TRUE\r\n"
      "mpi_thread_level: funneled # comment\n");
  EXPECT_EQ(config.mixed_precision, "fp16");
  EXPECT_EQ(config.log_level, "debug");
  EXPECT_EQ(config.use_cpu, true);
  EXPECT_EQ(config.mpi_thread_level, "funneled");
  // Bare `no` is the string "no" here (PyYAML would read false; we write it quoted).
  EXPECT_EQ(parse("mixed_precision: no\n").mixed_precision, "no");
  EXPECT_EQ(parse("mixed_precision: \"no\"").mixed_precision, "no");  // no final newline
  // A '#' inside a plain value without a blank before it is part of the value.
  EXPECT_NE(parse_error("log_level: info#x\n").find("'info#x' is not accepted"), std::string::npos);
}

TEST(ConfigFile, PythonAccelerateKeysAreAcceptedAndReported) {
  // A file as Python Accelerate's `accelerate config` writes it (yaml.safe_dump:
  // sorted keys, nested sections), read here for the four settings it shares.
  const ConfigFile config = parse(
      "compute_environment: LOCAL_MACHINE\n"
      "debug: false\n"
      "deepspeed_config: {}\n"
      "distributed_type: MULTI_GPU\n"
      "downcast_bf16: 'no'\n"
      "dynamo_config:\n"
      "  dynamo_backend: INDUCTOR\n"
      "enable_cpu_affinity: false\n"
      "fsdp_config:\n"
      "  fsdp_sharding_strategy: FULL_SHARD\n"
      "  fsdp_offload_params: false\n"
      "  a_key_this_library_never_reads: 1\n"
      "gpu_ids: all\n"
      "machine_rank: 0\n"
      "main_process_ip: 10.0.0.1\n"
      "main_process_port: 29500\n"
      "main_training_function: main\n"
      "megatron_lm_config: {}\n"
      "mixed_precision: bf16\n"
      "mpirun_config: {}\n"
      "num_machines: 1\n"
      "num_processes: 8\n"
      "rdzv_backend: static\n"
      "same_network: true\n"
      "tpu_env: []\n"
      "tpu_use_cluster: false\n"
      "tpu_use_sudo: false\n"
      "tpu_vm:\n"
      "- a\n"
      "- b\n"
      "use_cpu: false\n");
  const std::vector<std::string> expected{"compute_environment",
                                          "deepspeed_config",
                                          "distributed_type",
                                          "downcast_bf16",
                                          "dynamo_config",
                                          "fsdp_config",
                                          "gpu_ids",
                                          "machine_rank",
                                          "main_process_ip",
                                          "main_process_port",
                                          "main_training_function",
                                          "megatron_lm_config",
                                          "mpirun_config",
                                          "num_machines",
                                          "num_processes",
                                          "rdzv_backend",
                                          "same_network",
                                          "tpu_env",
                                          "tpu_use_cluster",
                                          "tpu_use_sudo",
                                          "tpu_vm"};
  EXPECT_EQ(config.unknown_keys, expected);
  EXPECT_EQ(config.mixed_precision, "bf16");
  EXPECT_EQ(config.use_cpu, false);
  EXPECT_EQ(config.debug_mode, false);
  EXPECT_EQ(config.cpu_affinity, false);

  // The SageMaker variant, the TPU-pod and newer sections, and the two old keys
  // Python Accelerate still converts.
  const ConfigFile other = parse(
      "compute_environment: AMAZON_SAGEMAKER\n"
      "distributed_type: DATA_PARALLEL\n"
      "ec2_instance_type: ml.p3.2xlarge\n"
      "iam_role_name: role\n"
      "image_uri: null\n"
      "profile: default\n"
      "region: us-east-1\n"
      "base_job_name: job\n"
      "pytorch_version: 2.0.0\n"
      "transformers_version: 4.30.0\n"
      "py_version: py310\n"
      "sagemaker_inputs_file: inputs.tsv\n"
      "sagemaker_metrics_file: metrics.tsv\n"
      "additional_args: {}\n"
      "fp8_config: {}\n"
      "parallelism_config: {}\n"
      "tp_config: {}\n"
      "ipex_config: {}\n"
      "tpu_name: pod\n"
      "tpu_zone: zone\n"
      "command_file: run.sh\n"
      "commands: [a]\n"
      "fp16: true\n"
      "dynamo_backend: 'NO'\n");
  EXPECT_EQ(other.unknown_keys.size(), 24U);
}

TEST(ConfigFile, UnknownKeyIsAnErrorNamingTheNearestKnownKey) {
  struct Case {
    std::string line;
    std::string key;
    std::string nearest;
  };
  const std::vector<Case> cases{
      {"mixd_precision: bf16\n", "mixd_precision", "mixed_precision"},    // a letter missing
      {"ues_cpu: true\n", "ues_cpu", "use_cpu"},                          // two letters swapped
      {"Mixed-Precision: bf16\n", "Mixed-Precision", "mixed_precision"},  // case and '-'
      {"gradient_accumulation_step: 2\n", "gradient_accumulation_step", "gradient_accumulation_steps"},
      {"num_proceses: 4\n", "num_proceses", "num_processes"},             // an ignored key's typo
      {"fsdp_confg:\n  fsdp_version: 2\n", "fsdp_confg", "fsdp_config"},  // a section's name
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    const std::string message = parse_error("# header\nuse_cpu: true\n" + c.line);
    EXPECT_NE(message.find("config file '/etc/cluster.yaml', line 3, key '" + c.key + "': this key is not known"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("did you mean '" + c.nearest + "'?"), std::string::npos) << message;
  }
  // A key longer than any typo gets no suggestion (the distance table grows with it).
  const std::string long_key = parse_error(std::string(200, 'k') + ": 1\n");
  EXPECT_NE(long_key.find("': this key is not known. Correct the name"), std::string::npos) << long_key.substr(0, 200);
}

TEST(ConfigFile, TabIndentationIsAnErrorNamingTheLine) {
  struct Case {
    std::string text;
    int line;
  };
  const std::vector<Case> cases{
      {"\tuse_cpu: true\n", 1},                                                // a key
      {"debug: false\nuse_cpu:\n\ttrue\n", 3},                                 // a value on its own line
      {"fsdp_config:\n  fsdp_version: 2\n \tfsdp_offload_params: true\n", 3},  // a nested key, after a blank
      {"tpu_vm:\n\t- a\n", 2},                                                 // a list item
      {"debug: false\r\n\tuse_cpu: true\r\n", 2},                              // Windows line endings
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string message = parse_error(c.text);
    EXPECT_NE(message.find("config file '/etc/cluster.yaml', line " + std::to_string(c.line) +
                           ": the line is indented with a tab"),
              std::string::npos)
        << message;
  }
  // Tabs elsewhere are YAML's: in comment and blank lines, after the colon, and
  // in the text of a block scalar after its indentation.
  const ConfigFile config = parse(
      "\t# a comment\n"
      " \t \n"
      "use_cpu:\ttrue\n"
      "commands: |\n"
      "  echo\n"
      "  \ttabbed text\n"
      "log_level: info\n");
  EXPECT_EQ(config.use_cpu, true);
  EXPECT_EQ(config.log_level, "info");
}

TEST(ConfigFile, InvalidValuesNameFileLineKeyAndAcceptedValues) {
  struct Case {
    std::string text;
    std::string key;
    std::string accepted;
  };
  const std::vector<Case> cases{
      {"mixed_precision: fp8\n", "mixed_precision", "no, fp16, bf16"},
      {"use_cpu: maybe\n", "use_cpu", "true or false"},
      {"use_cpu: 'true'\n", "use_cpu", "quoted"},
      {"debug: 1\n", "debug", "true or false"},
      {"enable_cpu_affinity: enabled\n", "enable_cpu_affinity", "true or false"},
      {"gradient_accumulation_steps: 0\n", "gradient_accumulation_steps", "1 … 1073741824"},
      {"gradient_accumulation_steps: four\n", "gradient_accumulation_steps", "whole number"},
      {"gradient_accumulation_steps: 2.5\n", "gradient_accumulation_steps", "whole number"},
      {"gradient_accumulation_steps: '4'\n", "gradient_accumulation_steps", "quoted"},
      {"gradient_accumulation_steps: 99999999999999999999999\n", "gradient_accumulation_steps", "out of range"},
      {"log_level: verbose\n", "log_level", "debug, info, warning, error"},
      {"timeout: 0\n", "timeout", "1 … 604800"},
      {"timeout: 604801\n", "timeout", "1 … 604800"},
      {"mpi_thread_level: full\n", "mpi_thread_level", "single, funneled, serialized, multiple"},
      {"emulated_ranks_per_node: -2\n", "emulated_ranks_per_node", "1 … 1048576"},
      {"use_cpu:\n", "use_cpu", "no value"},
      {"timeout: null\n", "timeout", "no value"},
      {"log_level: [info, debug]\n", "log_level", "the value is a list"},
      {"mixed_precision: {mode: bf16}\n", "mixed_precision", "the value is a mapping"},
      {"use_cpu: !!str true\n", "use_cpu", "quoted"},
  };
  for (const Case& c : cases) {
    // Put the bad line on line 3 so the number is checked, not assumed.
    const std::string message = parse_error("# header\nnum_processes: 2\n" + c.text);
    SCOPED_TRACE(c.text);
    ASSERT_FALSE(message.empty()) << "accepted: " << c.text;
    EXPECT_NE(message.find("config file '/etc/cluster.yaml', line 3, key '" + c.key + "'"), std::string::npos)
        << message;
    EXPECT_NE(message.find(c.accepted), std::string::npos) << message;
  }
}

TEST(ConfigFile, MalformedLinesAreErrors) {
  EXPECT_NE(parse_error("use_cpu true\n").find("line 1: the file holds the plain value 'use_cpu true'"),
            std::string::npos);
  // No blank after the colon: YAML reads one key "use_cpu:true", which is named.
  EXPECT_NE(parse_error("debug: false\nuse_cpu:true\n").find("line 2: 'use_cpu:true' is not a key"), std::string::npos);
  EXPECT_NE(parse_error("\"quoted key\": 1\n").find("line 1: 'quoted key' is not a key"), std::string::npos);
  EXPECT_NE(parse_error("? [a, b]\n: 1\n").find("line 1: 'a list or mapping' is not a key"), std::string::npos);
  EXPECT_NE(parse_error("- item\n").find("line 1: the file holds a list"), std::string::npos);
  EXPECT_NE(parse_error("debug: false\n---\nuse_cpu: true\n").find("line 2: a second YAML document"),
            std::string::npos);
  // Duplicates name both lines.
  const std::string duplicate = parse_error("use_cpu: true\n\nuse_cpu: false\n");
  EXPECT_NE(duplicate.find("line 3, key 'use_cpu': the key was already set on line 1"), std::string::npos) << duplicate;
  EXPECT_NE(parse_error("num_processes: 1\nnum_processes: 2\n").find("already set on line 1"), std::string::npos);
}

TEST(ConfigFile, TextThatIsNotYamlNamesTheFileAndTheLine) {
  struct Case {
    std::string text;
    int line;
  };
  const std::vector<Case> cases{
      {"use_cpu: true\n  nested: 1\n", 2},              // indentation under a plain value
      {"# header\nlog_level: \"info\" trailing\n", 2},  // text after a closing quote
      {"# header\nlog_level: \"in\\qfo\"\n", 2},        // an escape YAML does not have
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string message = parse_error(c.text);
    EXPECT_NE(message.find("config file '/etc/cluster.yaml', line " + std::to_string(c.line) +
                           ": this is not valid YAML ("),
              std::string::npos)
        << message;
  }
  // A ',' before the first node: yaml-cpp 0.7's LoadAll never returned on this (found by fuzzing).
  EXPECT_NE(parse_error(",\nuse_cpu: true\n").find("line 1: this is not valid YAML"), std::string::npos);
  // Nesting deep enough to exhaust a recursive parser is an error, not a crash.
  EXPECT_NE(parse_error("key: " + std::string(100000, '[')).find("not valid YAML"), std::string::npos);
}

TEST(ConfigFile, WriteThenLoadRoundTrips) {
  TempDir dir;
  ConfigFile config;
  config.mixed_precision = "no";
  config.use_cpu = true;
  config.debug_mode = true;
  config.cpu_affinity = false;
  config.gradient_accumulation_steps = 16;
  config.log_level = "error";
  config.timeout = std::chrono::seconds(90);
  config.mpi_thread_level = "multiple";
  config.emulated_ranks_per_node = 3;
  const fs::path path = dir.path() / "sub" / "dir" / "config.yaml";  // parents are created
  accelerate::write_config_file(config, path);

  const std::string text = read(path);
  EXPECT_NE(text.find("mixed_precision: 'no'\n"), std::string::npos) << text;  // quoted for YAML 1.1 readers
  EXPECT_NE(text.find("debug: true\n"), std::string::npos) << text;
  EXPECT_NE(text.find("enable_cpu_affinity: false\n"), std::string::npos) << text;

  const std::optional<ConfigFile> loaded = accelerate::load_config_file(path);
  ASSERT_TRUE(loaded);
  config.source = path;
  EXPECT_EQ(*loaded, config);

  // Replacing leaves no temporary files behind.
  config.mixed_precision = "bf16";
  accelerate::write_config_file(config, path);
  EXPECT_EQ(accelerate::load_config_file(path)->mixed_precision, "bf16");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(path.parent_path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);

  // An empty configuration round-trips too.
  accelerate::write_config_file(ConfigFile{}, path);
  ConfigFile empty;
  empty.source = path;
  EXPECT_EQ(*accelerate::load_config_file(path), empty);
}

TEST(ConfigFile, LoadMissingExistingAndBadFiles) {
  TempDir dir;
  EXPECT_FALSE(accelerate::load_config_file(dir.path() / "absent.yaml"));
  EXPECT_THROW(accelerate::require_config_file(dir.path() / "absent.yaml"), ConfigError);
  EXPECT_THROW(accelerate::load_config_file(dir.path()), ConfigError);  // a directory

  const fs::path bad = dir.path() / "bad.yaml";
  write(bad, "use_cpu: true\ntimeout: soon\n");
  try {
    accelerate::load_config_file(bad);
    FAIL() << "bad file accepted";
  } catch (const ConfigError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("config file '" + bad.string() + "', line 2, key 'timeout'"), std::string::npos) << message;
  }

  // A file larger than any configuration (a wrong path, say) is refused before it is read.
  const fs::path huge = dir.path() / "huge.yaml";
  write(huge, std::string(accelerate::kMaxConfigFileBytes + 1, '#'));
  try {
    accelerate::load_config_file(huge);
    FAIL() << "oversized file accepted";
  } catch (const ConfigError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'" + huge.string() + "' is " + std::to_string(accelerate::kMaxConfigFileBytes + 1) +
                           " bytes, more than"),
              std::string::npos)
        << message;
  }
}

TEST(ConfigFile, DefaultLocationPrecedence) {
  const std::string name(accelerate::kDefaultConfigFileName);
  {
    ScopedEnv env{{"ACCELERATE_CONFIG_FILE", "/site/acc.yaml"},
                  {"HF_HOME", "/hf"},
                  {"XDG_CACHE_HOME", "/xdg"},
                  {"HOME", "/home/u"}};
    EXPECT_EQ(accelerate::default_config_file(), fs::path("/site/acc.yaml"));
    EXPECT_EQ(accelerate::locate_default_config_file().origin, "ACCELERATE_CONFIG_FILE");
  }
  {
    ScopedEnv env{{"ACCELERATE_CONFIG_FILE", ""}, {"HF_HOME", "/hf"}, {"XDG_CACHE_HOME", "/xdg"}, {"HOME", "/home/u"}};
    EXPECT_EQ(accelerate::default_config_file(), fs::path("/hf/accelerate/" + name));
    EXPECT_EQ(accelerate::locate_default_config_file().origin, "HF_HOME");
  }
  {
    ScopedEnv env{{"ACCELERATE_CONFIG_FILE", std::nullopt},
                  {"HF_HOME", std::nullopt},
                  {"XDG_CACHE_HOME", "/xdg"},
                  {"HOME", "/home/u"}};
    EXPECT_EQ(accelerate::default_config_file(), fs::path("/xdg/huggingface/accelerate/" + name));
  }
  {
    ScopedEnv env{{"ACCELERATE_CONFIG_FILE", std::nullopt},
                  {"HF_HOME", std::nullopt},
                  {"XDG_CACHE_HOME", std::nullopt},
                  {"HOME", "/home/u"}};
    EXPECT_EQ(accelerate::default_config_file(), fs::path("/home/u/.cache/huggingface/accelerate/" + name));
    EXPECT_EQ(accelerate::locate_default_config_file().origin, "HOME");
  }
  {
    ScopedEnv env{{"ACCELERATE_CONFIG_FILE", std::nullopt},
                  {"HF_HOME", "~/hf"},
                  {"XDG_CACHE_HOME", std::nullopt},
                  {"HOME", "/home/u"}};
    EXPECT_EQ(accelerate::default_config_file(), fs::path("/home/u/hf/accelerate/" + name));
  }
  {
    ScopedEnv env{{"ACCELERATE_CONFIG_FILE", std::nullopt},
                  {"HF_HOME", std::nullopt},
                  {"XDG_CACHE_HOME", std::nullopt},
                  {"HOME", std::nullopt}};
    EXPECT_THROW(accelerate::default_config_file(), ConfigError);
  }
}

TEST(ConfigFile, LoadDefaultConfigFile) {
  TempDir dir;
  {
    ScopedEnv env{{"ACCELERATE_CONFIG_FILE", std::nullopt}, {"HF_HOME", dir.path().string()}};
    EXPECT_FALSE(accelerate::load_default_config_file());  // absent at the default location: fine
    write(dir.path() / "accelerate" / std::string(accelerate::kDefaultConfigFileName), "log_level: info\n");
    const std::optional<ConfigFile> config = accelerate::load_default_config_file();
    ASSERT_TRUE(config);
    EXPECT_EQ(config->log_level, "info");
  }
  {
    // A file the user named must exist.
    ScopedEnv env{{"ACCELERATE_CONFIG_FILE", (dir.path() / "typo.yaml").string()}};
    try {
      accelerate::load_default_config_file();
      FAIL() << "missing ACCELERATE_CONFIG_FILE accepted";
    } catch (const ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find("ACCELERATE_CONFIG_FILE names"), std::string::npos);
    }
  }
}

TEST(ConfigFile, WriteBasicConfigDoesNotOverwrite) {
  TempDir dir;
  const fs::path path = dir.path() / "accelerate" / "basic.yaml";
  ASSERT_TRUE(accelerate::write_basic_config("BF16", path));
  std::optional<ConfigFile> config = accelerate::load_config_file(path);
  ASSERT_TRUE(config);
  EXPECT_EQ(config->mixed_precision, "bf16");
  EXPECT_EQ(config->use_cpu, !accelerate::is_cuda_available());
  EXPECT_TRUE(config->unknown_keys.empty());

  // A second call leaves the file (here hand-edited) alone and says so.
  write(path, "mixed_precision: fp16\n# edited\n");
  EXPECT_FALSE(accelerate::write_basic_config("no", path));
  EXPECT_EQ(read(path), "mixed_precision: fp16\n# edited\n");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(path.parent_path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1) << "temporary file left behind";

  // Invalid input is rejected before anything is written.
  const fs::path other = dir.path() / "other.yaml";
  EXPECT_THROW(accelerate::write_basic_config("fp8", other), ConfigError);
  EXPECT_FALSE(fs::exists(other));

  // The default argument is the default location.
  ScopedEnv env{{"ACCELERATE_CONFIG_FILE", std::nullopt}, {"HF_HOME", (dir.path() / "hf").string()}};
  ASSERT_TRUE(accelerate::write_basic_config());
  config = accelerate::load_default_config_file();
  ASSERT_TRUE(config);
  EXPECT_EQ(config->mixed_precision, "no");
  EXPECT_EQ(config->source, dir.path() / "hf" / "accelerate" / std::string(accelerate::kDefaultConfigFileName));
}

TEST(ConfigFile, UnwritableLocationIsAConfigError) {
  // A path below a regular file fails for every user, root included
  // (root ignores directory permissions).
  TempDir dir;
  write(dir.path() / "file", "x");
  try {
    accelerate::write_config_file(ConfigFile{}, dir.path() / "file" / "config.yaml");
    FAIL() << "wrote below a regular file";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("cannot create the directory of"), std::string::npos) << error.what();
  }
}

}  // namespace ACCELERATE_TEST_FILE_ID
