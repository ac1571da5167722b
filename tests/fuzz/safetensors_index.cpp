// Fuzz target: model.safetensors.index.json. Property: a malformed index is a
// ConfigError naming it; every accepted shard is a relative path that stays in
// the index's directory.
#include "checkpoint/safetensors_format.hpp"
#include "harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  accelerate::fuzz::expect_clear_errors("fuzz.index.json", [&] {
    const auto shards =
        accelerate::checkpoint::detail::parse_safetensors_index(accelerate::fuzz::as_text(data, size), "fuzz.index.json");
    for (const std::string& shard : shards) {
      if (shard.empty() || shard.front() == '/' || shard == ".." || shard.starts_with("../") ||
          shard.find("/../") != std::string::npos || shard.ends_with("/..")) {
        accelerate::fuzz::finding("accepted a shard outside the index's directory: " + shard);
      }
    }
  });
  return 0;
}
