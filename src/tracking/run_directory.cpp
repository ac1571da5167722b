#include "tracking/run_directory.hpp"

#include <chrono>
#include <cstring>
#include <system_error>

#include "accelerate/error.hpp"

namespace accelerate::tracking::detail {
namespace fs = std::filesystem;
using accelerate::detail::where;

void fail_on_file(const std::string& tracker, const std::string& what, const fs::path& path, int error) {
  throw ConfigError(tracker + " tracker: cannot " + what + " '" + path.string() + "': " + std::strerror(error) +
                    ". Check the logging directory (ProjectConfiguration::logging_dir or project_dir) and its "
                    "permissions and free space.");
}

fs::path make_run_directory(const std::string& tracker, const fs::path& logging_dir, const std::string& project_name) {
  if (logging_dir.empty()) {
    throw ConfigError(tracker +
                      " tracker: no logging directory. Set project_config.project_dir (or logging_dir) in "
                      "AcceleratorOptions.");
  }
  if (project_name.empty() || project_name.find('/') != std::string::npos || project_name == "." ||
      project_name == "..") {
    throw ConfigError(tracker + " tracker: the project name '" + project_name +
                      "' is not a directory name. Give init_trackers a name without '/'.");
  }
  const fs::path directory = logging_dir / project_name;
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) fail_on_file(tracker, "create the directory", directory, error.value());
  return directory;
}

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace accelerate::tracking::detail
