// Fuzz target: the YAML configuration file. Property: a malformed file is a
// ConfigError naming it; an accepted one is written back (to_yaml) as text
// that parses to the same settings.
#include "accelerate/runtime/config_file.hpp"
#include "harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  accelerate::fuzz::expect_clear_errors("fuzz.yaml", [&] {
    accelerate::ConfigFile config = accelerate::parse_config_file(accelerate::fuzz::as_text(data, size), "fuzz.yaml");
    accelerate::ConfigFile again = accelerate::parse_config_file(accelerate::to_yaml(config), "fuzz.yaml");
    config.unknown_keys.clear();  // not written back
    if (!(config == again)) accelerate::fuzz::finding("configuration does not round-trip through to_yaml");
  });
  return 0;
}
