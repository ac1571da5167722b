#include "checkpoint/safetensors_format.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <set>

#include "accelerate/error.hpp"
#include "accelerate/format.hpp"
#include "checkpoint/json.hpp"

namespace accelerate::checkpoint::detail {
namespace {

struct CodeSize {
  std::string_view code;
  std::size_t bytes;
};
constexpr std::array kSizes{CodeSize{"F32", 4}, CodeSize{"F64", 8}, CodeSize{"F16", 2}, CodeSize{"BF16", 2},
                            CodeSize{"I8", 1},  CodeSize{"U8", 1},  CodeSize{"I16", 2}, CodeSize{"I32", 4},
                            CodeSize{"I64", 8}, CodeSize{"BOOL", 1}};

constexpr std::string_view kDamaged =
    " The file is damaged or was not written by a safetensors writer; export it again.";

[[noreturn]] void fail(std::string_view file, const std::string& what) {
  throw ConfigError(accelerate::detail::where() + " safetensors: '" + std::string(file) + "': " + what);
}

// Member `key` of the header entry `name`, which must exist.
const Json& member(const Json& entry, const char* key, const std::string& name, std::string_view file) {
  const Json* value = entry.find(key);
  if (value == nullptr) fail(file, "tensor '" + name + "' has no \"" + key + "\"." + std::string(kDamaged));
  return *value;
}

std::uint64_t non_negative(const Json& value, const std::string& what, const std::string& name, std::string_view file) {
  if (!value.is_integer() || value.integer() < 0) {
    fail(file, "tensor '" + name + "': " + what + " is not a non-negative integer." + std::string(kDamaged));
  }
  return static_cast<std::uint64_t>(value.integer());
}

SafetensorsEntry parse_entry(const std::string& name, const Json& info, std::uint64_t data_bytes,
                             std::string_view file) {
  if (!info.is_object()) fail(file, "tensor '" + name + "' is not a JSON object." + std::string(kDamaged));
  SafetensorsEntry entry;
  entry.name = name;
  const Json& dtype = member(info, "dtype", name, file);
  if (!dtype.is_string()) fail(file, "tensor '" + name + "': \"dtype\" is not a string." + std::string(kDamaged));
  entry.dtype = dtype.string();
  const std::size_t element = safetensors_element_size(entry.dtype);
  if (element == 0) {
    fail(file, "tensor '" + name + "' has dtype '" + entry.dtype +
                   "', which this version cannot read (it reads F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL).");
  }
  const Json& shape = member(info, "shape", name, file);
  if (!shape.is_array()) fail(file, "tensor '" + name + "': \"shape\" is not an array." + std::string(kDamaged));
  // Bytes the shape declares, bounded by the data actually present so that no
  // product can overflow and nothing larger than the file is ever allocated.
  std::uint64_t bytes = element;
  bool empty = false;
  for (const Json& size : shape.array()) {
    const std::uint64_t dimension = non_negative(size, "a dimension of \"shape\"", name, file);
    if (dimension > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(file, "tensor '" + name + "' has a dimension too large." + std::string(kDamaged));
    }
    entry.shape.push_back(static_cast<std::int64_t>(dimension));
    if (dimension == 0) empty = true;
    if (!empty && bytes > data_bytes / dimension) {
      fail(file, "tensor '" + name + "' declares more bytes than the file holds (" + std::to_string(data_bytes) +
                     " bytes of data)." + std::string(kDamaged));
    }
    if (!empty) bytes *= dimension;
  }
  if (empty) bytes = 0;
  const Json& offsets = member(info, "data_offsets", name, file);
  if (!offsets.is_array() || offsets.array().size() != 2) {
    fail(file, "tensor '" + name + "': \"data_offsets\" is not a pair [begin, end]." + std::string(kDamaged));
  }
  entry.begin = non_negative(offsets.array()[0], "the begin offset", name, file);
  entry.end = non_negative(offsets.array()[1], "the end offset", name, file);
  if (entry.begin > entry.end || entry.end > data_bytes) {
    fail(file, "tensor '" + name + "' has data offsets [" + std::to_string(entry.begin) + ", " +
                   std::to_string(entry.end) + ") outside the " + std::to_string(data_bytes) + " bytes of data." +
                   std::string(kDamaged));
  }
  if (entry.end - entry.begin != bytes) {
    fail(file, "tensor '" + name + "' has data offsets that do not match its shape and dtype (" +
                   std::to_string(entry.end - entry.begin) + " bytes for " + std::to_string(bytes) + ")." +
                   std::string(kDamaged));
  }
  return entry;
}

}  // namespace

std::size_t safetensors_element_size(std::string_view code) {
  for (const auto& entry : kSizes) {
    if (entry.code == code) return entry.bytes;
  }
  return 0;
}

std::uint64_t safetensors_header_length(std::string_view first_bytes, std::uint64_t file_size, std::string_view file) {
  if (first_bytes.size() < 8 || file_size < 8) {
    fail(file, "is not a safetensors file: it is shorter than the 8-byte header length.");
  }
  std::uint64_t length = 0;
  for (int b = 7; b >= 0; --b)
    length = (length << 8) | static_cast<unsigned char>(first_bytes[static_cast<std::size_t>(b)]);
  if (length > kMaxSafetensorsHeaderBytes) {
    fail(file, "is not a safetensors file: its header length " + std::to_string(length) + " exceeds the limit of " +
                   std::to_string(kMaxSafetensorsHeaderBytes) + " bytes.");
  }
  if (length > file_size - 8) {
    fail(file, "is not a safetensors file, or is truncated: its header length " + std::to_string(length) +
                   " runs past the end of the file (" + std::to_string(file_size) + " bytes).");
  }
  return length;
}

std::vector<SafetensorsEntry> parse_safetensors_header(std::string_view text, std::uint64_t data_bytes,
                                                       std::string_view file) {
  const Json header = Json::parse(text, file);
  if (!header.is_object()) fail(file, "the header is not a JSON object." + std::string(kDamaged));
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, info] : header.object()) {
    if (name == "__metadata__") continue;
    entries.push_back(parse_entry(name, info, data_bytes, file));
  }
  return entries;
}

std::vector<std::string> parse_safetensors_index(std::string_view text, std::string_view file) {
  if (text.size() > kMaxSafetensorsIndexBytes) {
    fail(file, "is larger than the limit of " + std::to_string(kMaxSafetensorsIndexBytes) +
                   " bytes for an index; it is not a model.safetensors.index.json.");
  }
  const Json index = Json::parse(text, file);
  const Json* weight_map = index.find("weight_map");
  if (weight_map == nullptr || !weight_map->is_object()) {
    fail(file, "has no \"weight_map\" object; it is not a model.safetensors.index.json.");
  }
  std::set<std::string> shards;
  for (const auto& [name, shard] : weight_map->object()) {
    if (!shard.is_string() || shard.string().empty()) {
      fail(file, "the weight map entry of '" + name + "' is not a file name.");
    }
    const std::string& path = shard.string();
    bool escapes = path.front() == '/' || path.find('\0') != std::string::npos;
    for (std::size_t start = 0; start <= path.size() && !escapes;) {
      const std::size_t slash = std::min(path.find('/', start), path.size());
      escapes = path.compare(start, slash - start, "..") == 0;
      start = slash + 1;
    }
    if (escapes) {
      fail(file, accelerate::format("the weight map sends '{}' to '{}', which is outside the index's directory; shard "
                                    "names must be relative paths without '..'.",
                                    name, path));
    }
    shards.insert(path);
  }
  return {shards.begin(), shards.end()};
}

}  // namespace accelerate::checkpoint::detail
