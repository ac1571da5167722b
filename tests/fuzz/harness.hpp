// What every fuzz harness shares. A harness is one function,
//
//   extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
//
// built twice: with libFuzzer (ACCELERATE_FUZZ=ON, clang) to search for
// crashing inputs, and with replay_main.cpp (any compiler) to run the seed
// corpus and every regression input under ctest.
//
// The property checked is the library's promise for untrusted input: a reader
// either succeeds or throws accelerate::Error (ConfigError, Hdf5Error, …) whose
// message names the input. A crash, a sanitizer report, any other exception,
// or an anonymous message aborts the harness, and so counts as a finding.
// ACCELERATE_FUZZ_VERBOSE=1 prints each error, to review the messages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "accelerate/error.hpp"

namespace accelerate::fuzz {

/// Aborts with `what`: the finding, as libFuzzer and the replay report it.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
  std::abort();
}

/// Runs `body`; an accelerate::Error must mention `source` (the file or
/// argument the reader was given), anything else thrown is a finding.
/// Returns the error's message, empty when `body` returned.
template <typename Body>
std::string expect_clear_errors(std::string_view source, Body&& body) {
  try {
    body();
  } catch (const Error& error) {
    const std::string_view message = error.what();
    if (std::getenv("ACCELERATE_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "  -> %s\n", error.what());
    if (!source.empty() && message.find(source) == std::string_view::npos) {
      finding("an error that does not name '" + std::string(source) + "': " + std::string(message));
    }
    return std::string(message);
  } catch (const std::exception& error) {
    finding(std::string("an exception that is not an accelerate::Error: ") + error.what());
  }
  return {};
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace accelerate::fuzz
