// Fuzz target: a checkpoint's manifest.json. Property: a damaged manifest is a
// ConfigError naming it; an accepted one lists only plain file names and
// survives a write and re-read unchanged.
#include "checkpoint/manifest.hpp"
#include "harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace detail = accelerate::checkpoint::detail;
  accelerate::fuzz::expect_clear_errors("fuzz/manifest.json", [&] {
    const auto manifest = detail::parse_manifest(accelerate::fuzz::as_text(data, size), "fuzz/manifest.json");
    for (const auto& file : manifest.files) {
      if (file.name.find('/') != std::string::npos || file.name == "..") {
        accelerate::fuzz::finding("accepted a file outside the checkpoint directory: " + file.name);
      }
    }
    const auto again = detail::parse_manifest(detail::manifest_json(manifest).dump(), "fuzz/manifest.json");
    if (detail::manifest_json(again).dump() != detail::manifest_json(manifest).dump()) {
      accelerate::fuzz::finding("manifest does not round-trip");
    }
  });
  return 0;
}
