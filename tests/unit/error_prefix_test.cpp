// Every error kind gets the "[rank r/n on host]" prefix from Error's
// constructor, exactly once: a bare message gains it, a message that already
// has one (this rank's, another rank's, or a host-only one) keeps it.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "accelerate/error.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::detail::where;

// Builds one kind of error from a message and returns what() of it as the
// base class sees it, so every kind goes through the same checks.
using Make = std::function<std::string(const std::string&)>;

template <class E>
Make plain() {
  return [](const std::string& message) {
    const accelerate::Error& error = E(message);
    return std::string(error.what());
  };
}

template <class E>
Make with_code() {
  return [](const std::string& message) {
    const E error(message, 7);
    EXPECT_EQ(error.code(), 7);
    return std::string(static_cast<const accelerate::Error&>(error).what());
  };
}

std::vector<std::pair<std::string, Make>> every_kind() {
  return {
      {"Error", plain<accelerate::Error>()},
      {"MpiError", with_code<accelerate::MpiError>()},
      {"NcclError", with_code<accelerate::NcclError>()},
      {"CudaError", with_code<accelerate::CudaError>()},
      {"Hdf5Error", plain<accelerate::Hdf5Error>()},
      {"ConfigError", plain<accelerate::ConfigError>()},
      {"LaunchError", plain<accelerate::LaunchError>()},
      {"FeatureNotBuilt", plain<accelerate::FeatureNotBuilt>()},
      {"CollectiveMismatch", plain<accelerate::CollectiveMismatch>()},
      {"TimeoutError", plain<accelerate::TimeoutError>()},
  };
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(ErrorPrefix, BareMessageGetsExactlyOne) {
  const std::string prefix = where();
  ASSERT_FALSE(prefix.empty());
  const std::string body = "load_state: 'ckpt/step_7' has no entry 'model'. List it with 'h5ls -r'.";
  for (const auto& [kind, make] : every_kind()) {
    const std::string what = make(body);
    EXPECT_EQ(what, prefix + " " + body) << kind;
    EXPECT_EQ(count(what, prefix), 1U) << kind;
  }
}

TEST(ErrorPrefix, ExistingPrefixIsKept) {
  const std::vector<std::string> prefixed = {
      where() + " checkpoint: already named by the site.",
      "[rank 3/8 on node017] relayed from another rank: out of memory.",
      "[rank 12/512 on gpu-a100_03.cluster] a longer host name.",
      "[node017] raised before MPI started.",
      "[unknown-host] gethostname failed.",
      "[node017]",  // nothing after the prefix
  };
  for (const auto& [kind, make] : every_kind()) {
    for (const std::string& message : prefixed) EXPECT_EQ(make(message), message) << kind;
  }
}

TEST(ErrorPrefix, BracketsThatAreNotAPrefixGetOne) {
  // Message text that opens with a bracket, but not in where()'s shape.
  const std::vector<std::string> bodies = {
      "[1, 2] and [3] differ in shape.",
      "[rank 3/8 on node017]: the colon makes it text.",
      "[rank x/8 on node017] not a rank number.",
      "[rank 3/8] no host.",
      "[] empty brackets.",
      "[unclosed bracket",
      "",
  };
  const std::string prefix = where() + " ";
  for (const auto& [kind, make] : every_kind()) {
    for (const std::string& body : bodies) EXPECT_EQ(make(body), prefix + body) << kind << ": '" << body << "'";
  }
}

TEST(ErrorPrefix, FeatureNotBuiltHasOne) {
  try {
    accelerate::detail::throw_feature_not_built("NCCL", "make_nccl_backend", "ACCELERATE_WITH_NCCL");
  } catch (const accelerate::FeatureNotBuilt& error) {
    const std::string what = error.what();
    EXPECT_EQ(what.rfind(where() + " make_nccl_backend needs NCCL, but", 0), 0U) << what;
    EXPECT_EQ(count(what, where()), 1U) << what;
  }
}

TEST(ErrorPrefix, CopiesAndRethrowsDoNotAddAnother) {
  const std::string prefix = where();
  try {
    try {
      throw accelerate::ConfigError("split_between_processes: uneven lengths.");
    } catch (const accelerate::Error& error) {
      throw accelerate::Error(error.what());  // a handler that wraps what() again
    }
  } catch (const accelerate::Error& error) {
    const accelerate::Error copy = error;
    EXPECT_EQ(std::string(copy.what()), prefix + " split_between_processes: uneven lengths.");
  }
}

TEST(ErrorPrefix, SameFromAnotherThread) {
  // Watchdogs and background writers build errors off the main thread.
  std::string from_thread;
  std::thread([&] { from_thread = accelerate::TimeoutError("checkpoint writer: no progress.").what(); }).join();
  EXPECT_EQ(from_thread, where() + " checkpoint writer: no progress.");
}

}  // namespace
}  // namespace ACCELERATE_TEST_FILE_ID
