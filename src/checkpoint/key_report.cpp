#include "accelerate/checkpoint/key_report.hpp"

#include <map>

namespace accelerate::checkpoint {

std::string shape_to_string(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

KeyReport compare_keys(const std::vector<TensorSpec>& expected, const std::vector<TensorSpec>& found) {
  std::map<std::string, const TensorSpec*> in_file;
  for (const TensorSpec& spec : found) in_file[spec.name] = &spec;
  KeyReport report;
  std::map<std::string, bool> wanted;
  for (const TensorSpec& spec : expected) {
    wanted[spec.name] = true;
    const auto it = in_file.find(spec.name);
    if (it == in_file.end()) {
      report.missing.push_back(spec.name);
    } else if (it->second->shape != spec.shape || it->second->dtype != spec.dtype) {
      report.mismatched.push_back(KeyMismatch{spec.name, spec, *it->second});
    }
  }
  for (const TensorSpec& spec : found) {
    if (wanted.count(spec.name) == 0) report.unexpected.push_back(spec.name);
  }
  return report;
}

std::string KeyReport::to_string() const {
  std::string text;
  auto list = [&](const char* title, const std::vector<std::string>& names) {
    if (names.empty()) return;
    text += std::string("  ") + title + " (" + std::to_string(names.size()) + "):";
    for (const std::string& name : names) text += " " + name;
    text += "\n";
  };
  list("missing keys", missing);
  list("unexpected keys", unexpected);
  if (!mismatched.empty()) {
    text += "  mismatched keys (" + std::to_string(mismatched.size()) + "):\n";
    for (const KeyMismatch& m : mismatched) {
      text += "    " + m.name + ": expected " + m.expected.dtype + " " + shape_to_string(m.expected.shape) +
              ", checkpoint has " + m.found.dtype + " " + shape_to_string(m.found.shape) + "\n";
    }
  }
  return text;
}

}  // namespace accelerate::checkpoint
