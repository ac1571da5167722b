#include "accelerate/training_state/project_configuration.hpp"

#include "accelerate/error.hpp"

namespace accelerate::checkpoint {

void ProjectConfiguration::set_directories(const std::string& directory) {
  project_dir = directory;
  if (logging_dir.empty()) logging_dir = directory;
}

void ProjectConfiguration::validate() const {
  auto fail = [](const std::string& what) { throw ConfigError("ProjectConfiguration: " + what); };
  if (automatic_checkpoint_naming && project_dir.empty()) {
    fail(
        "automatic_checkpoint_naming=true needs project_dir (checkpoints go to <project_dir>/checkpoints). "
        "Set project_dir or call set_directories().");
  }
  if (total_limit && *total_limit < 1) {
    fail("total_limit=" + std::to_string(*total_limit) +
         " would delete every checkpoint. Use a value >= 1, or leave it unset to keep all.");
  }
  if (iteration < 0) fail("iteration=" + std::to_string(iteration) + " is negative.");
  if (!local_dir.empty() && !automatic_checkpoint_naming) {
    fail("local_dir='" + local_dir +
         "' keeps a node-local copy of each checkpoint under the same name as in project_dir, which needs "
         "automatic_checkpoint_naming=true. Turn it on, or leave local_dir empty.");
  }
}

std::filesystem::path checkpoints_directory(const ProjectConfiguration& config) {
  return std::filesystem::path(config.project_dir) / "checkpoints";
}

std::filesystem::path local_checkpoints_directory(const ProjectConfiguration& config) {
  return std::filesystem::path(config.local_dir) / "checkpoints";
}

std::filesystem::path automatic_checkpoint_path(const ProjectConfiguration& config, std::int64_t iteration) {
  return checkpoints_directory(config) / ("checkpoint_" + std::to_string(iteration));
}

}  // namespace accelerate::checkpoint
