// Exception hierarchy of Accelerate-HPC.
//
// Every error the library raises derives from accelerate::Error. Messages
// follow one shape so they can be acted on from a job's log alone:
//
//   [rank 3/8 on node017] <call or component>: <what went wrong>. <what to do>
//
// Error's constructor adds the rank prefix (detail::where()), so a message
// read from an interleaved multi-rank log still says who raised it and no
// throwing site can leave it out. A message that already starts with one
// ("[rank r/n on host] " or "[host] ", e.g. relayed from another rank) keeps it.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace accelerate {

/// Base of every exception thrown by Accelerate-HPC.
class Error : public std::runtime_error {
 public:
  /// `message` with detail::where() in front, unless it already has a prefix.
  explicit Error(const std::string& message);
};

/// An MPI call returned an error code. code() is the MPI error code.
class MpiError : public Error {
 public:
  MpiError(const std::string& message, int code) : Error(message), code_(code) {}
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

/// An NCCL call failed. code() is the ncclResult_t value.
class NcclError : public Error {
 public:
  NcclError(const std::string& message, int code) : Error(message), code_(code) {}
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

/// A CUDA runtime call failed. code() is the cudaError_t value.
class CudaError : public Error {
 public:
  CudaError(const std::string& message, int code) : Error(message), code_(code) {}
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

/// An HDF5 call failed; the message carries HDF5's error stack.
class Hdf5Error : public Error {
 public:
  using Error::Error;
};

/// Invalid configuration: a bad option value, environment variable or config file entry.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// The launcher's view of the job disagrees with MPI's (wrong PMI plugin, mixed MPIs, …).
class LaunchError : public Error {
 public:
  using Error::Error;
};

/// A feature was requested that this build of the library does not contain.
class FeatureNotBuilt : public Error {
 public:
  using Error::Error;
};

/// Ranks entered a collective with incompatible arguments (shape, dtype, root, …).
class CollectiveMismatch : public Error {
 public:
  using Error::Error;
};

/// A collective or barrier did not complete within its timeout.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

namespace detail {

/// "[rank r/n on host]" when MPI is running, "[host]" otherwise.
std::string where();

/// Throws FeatureNotBuilt naming the feature, the call that needed it and the
/// CMake switch that enables it.
[[noreturn]] void throw_feature_not_built(std::string_view feature, std::string_view needed_by,
                                          std::string_view cmake_option);

}  // namespace detail
}  // namespace accelerate
