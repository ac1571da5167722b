// Fuzz target: the JSON parser behind safetensors headers, index files and
// checkpoint manifests. Property: malformed text is a ConfigError naming the
// source; valid text round-trips (dump, parse, dump gives the same text).
#include "detail/json.hpp"
#include "harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using accelerate::detail::Json;
  accelerate::fuzz::expect_clear_errors("fuzz.json", [&] {
    const std::string first = Json::parse(accelerate::fuzz::as_text(data, size), "fuzz.json").dump();
    const std::string second = Json::parse(first, "fuzz.json").dump();
    if (first != second) accelerate::fuzz::finding("JSON does not round-trip: " + first + " became " + second);
  });
  return 0;
}
