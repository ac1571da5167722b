#include "checkpoint/names.hpp"

#include <string>

#include "accelerate/error.hpp"

namespace accelerate::checkpoint::detail {

void validate_dataset_name(std::string_view name, const std::filesystem::path& file) {
  std::string_view problem;
  if (name.empty()) {
    problem = "is empty";
  } else if (name.front() == '/' || name.back() == '/') {
    problem = "starts or ends with '/'";
  } else {
    std::size_t start = 0;
    while (problem.empty() && start <= name.size()) {
      const std::size_t end = std::min(name.find('/', start), name.size());
      const std::string_view part = name.substr(start, end - start);
      if (part.empty()) problem = "contains '//'";
      else if (part == "." || part == "..") problem = "contains a '.' or '..' component";
      start = end + 1;
    }
  }
  if (problem.empty()) return;
  throw ConfigError("checkpoint: entry name '" + std::string(name) + "' for '" + file.string() + "' " +
                    std::string(problem) +
                    ". Use names like 'pytorch_model/fc1.weight' (groups separated by single '/').");
}

}  // namespace accelerate::checkpoint::detail

namespace accelerate::checkpoint {

std::string indexed_group(std::string_view base, std::size_t index) {
  return index == 0 ? std::string(base) : std::string(base) + "_" + std::to_string(index);
}

}  // namespace accelerate::checkpoint
