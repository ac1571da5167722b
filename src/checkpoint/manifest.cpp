#include "checkpoint/manifest.hpp"

#include <string>

#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/error.hpp"

namespace accelerate::checkpoint::detail {
namespace {

[[noreturn]] void manifest_error(std::string_view source, const std::string& what) {
  throw ConfigError("checkpoint: '" + std::string(source) + "' " + what +
                    " The checkpoint is incomplete or damaged; resume from another one.");
}

const Json& field(const Json& object, const char* key, std::string_view source) {
  const Json* value = object.find(key);
  if (value == nullptr) manifest_error(source, std::string("has no \"") + key + "\".");
  return *value;
}

std::int64_t integer_field(const Json& object, const char* key, std::int64_t min, std::string_view source) {
  const Json& value = field(object, key, source);
  if (!value.is_integer() || value.integer() < min) {
    manifest_error(source, std::string("has a \"") + key + "\" that is not an integer ≥ " + std::to_string(min) + ".");
  }
  return value.integer();
}

std::string string_field(const Json& object, const char* key, std::string_view source) {
  const Json& value = field(object, key, source);
  if (!value.is_string()) manifest_error(source, std::string("has a \"") + key + "\" that is not a string.");
  return value.string();
}

bool bool_field(const Json& object, const char* key, std::string_view source) {
  const Json& value = field(object, key, source);
  if (!value.is_bool()) manifest_error(source, std::string("has a \"") + key + "\" that is not true or false.");
  return value.boolean();
}

}  // namespace

Json manifest_json(const Manifest& manifest) {
  Json::Array files;
  for (const ManifestFile& file : manifest.files) {
    files.push_back(
        Json(Json::Object{{"name", Json(file.name)}, {"bytes", Json(static_cast<std::int64_t>(file.bytes))}}));
  }
  return Json(Json::Object{
      {"format", Json(manifest.format)},
      {"format_version", Json(manifest.format_version)},
      {"complete", Json(true)},
      {"step", Json(manifest.step)},
      {"iteration", Json(manifest.iteration)},
      {"world_size", Json(manifest.world_size)},
      {"num_nodes", Json(manifest.num_nodes)},
      {"save_on_each_node", Json(manifest.save_on_each_node)},
      {"created", Json(manifest.created)},
      {"files", Json(std::move(files))},
  });
}

Manifest parse_manifest(std::string_view text, std::string_view source) {
  if (text.size() > kMaxManifestBytes) {
    manifest_error(source, "is larger than a manifest can be (" + std::to_string(kMaxManifestBytes) + " bytes).");
  }
  const Json json = Json::parse(text, source);
  if (!json.is_object()) manifest_error(source, "is not a JSON object.");
  Manifest manifest;
  manifest.format = string_field(json, "format", source);
  if (manifest.format != FORMAT_NAME) {
    manifest_error(source, "has format '" + manifest.format + "', not '" + std::string(FORMAT_NAME) + "'.");
  }
  if (!bool_field(json, "complete", source)) manifest_error(source, "is not marked complete.");
  manifest.format_version = integer_field(json, "format_version", 1, source);
  manifest.step = integer_field(json, "step", 0, source);
  manifest.iteration = integer_field(json, "iteration", 0, source);
  manifest.world_size = integer_field(json, "world_size", 1, source);
  manifest.num_nodes = integer_field(json, "num_nodes", 1, source);
  manifest.save_on_each_node = bool_field(json, "save_on_each_node", source);
  manifest.created = string_field(json, "created", source);
  const Json& files = field(json, "files", source);
  if (!files.is_array() || files.array().empty()) manifest_error(source, "has no \"files\" list, or an empty one.");
  for (const Json& file : files.array()) {
    if (!file.is_object()) manifest_error(source, "has an entry of \"files\" that is not an object.");
    ManifestFile entry{string_field(file, "name", source),
                       static_cast<std::uint64_t>(integer_field(file, "bytes", 0, source))};
    // A file of the checkpoint lives in its directory: no separator, no "..".
    if (entry.name.empty() || entry.name == "." || entry.name == ".." ||
        entry.name.find_first_of(std::string_view("/\0", 2)) != std::string::npos) {
      manifest_error(source,
                     "lists the file '" + entry.name + "', which is not a file name inside the checkpoint directory.");
    }
    manifest.files.push_back(std::move(entry));
  }
  return manifest;
}

}  // namespace accelerate::checkpoint::detail
