// What every file-writing tracker shares: the run's directory
// <logging_dir>/<project_name>/, the errors that name a path, and the clock.
#pragma once

#include <filesystem>
#include <string>

namespace accelerate::tracking::detail {

/// Creates <logging_dir>/<project_name>/ and returns it. ConfigError when
/// there is no logging directory, the project name is not one directory
/// name, or the directory cannot be made.
std::filesystem::path make_run_directory(const std::string& tracker, const std::filesystem::path& logging_dir,
                                         const std::string& project_name);

/// ConfigError: `tracker` cannot `what` `path` (errno `error`), with the
/// settings to check.
[[noreturn]] void fail_on_file(const std::string& tracker, const std::string& what, const std::filesystem::path& path,
                               int error);

/// Seconds since the Unix epoch.
double wall_time();

}  // namespace accelerate::tracking::detail
