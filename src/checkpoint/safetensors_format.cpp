#include "checkpoint/safetensors_format.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <tuple>

#include "accelerate/error.hpp"
#include "accelerate/format.hpp"
#include "detail/json.hpp"

namespace accelerate::checkpoint::detail {
using accelerate::detail::Json;

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
  throw ConfigError("safetensors: '" + std::string(file) + "': " + what);
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
  // A zero anywhere in the shape makes the tensor empty whatever the other
  // dimensions are; their product must still fit 63 bits, as LibTorch's does.
  std::uint64_t bytes = element;
  const bool empty = std::any_of(shape.array().begin(), shape.array().end(),
                                 [](const Json& size) { return size.is_integer() && size.integer() == 0; });
  constexpr auto kMaxProduct = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t product = 1;  // of the non-zero dimensions of an empty tensor
  for (const Json& size : shape.array()) {
    const std::uint64_t dimension = non_negative(size, "a dimension of \"shape\"", name, file);
    if (dimension > kMaxProduct || (empty && dimension != 0 && product > kMaxProduct / dimension)) {
      fail(file, "tensor '" + name + "' has a dimension too large." + std::string(kDamaged));
    }
    entry.shape.push_back(static_cast<std::int64_t>(dimension));
    if (dimension == 0) continue;
    if (empty) {
      product *= dimension;
      continue;
    }
    if (bytes > data_bytes / dimension) {
      fail(file, "tensor '" + name + "' declares more bytes than the file holds (" + std::to_string(data_bytes) +
                     " bytes of data)." + std::string(kDamaged));
    }
    bytes *= dimension;
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

// The first name that the header's top-level object holds twice, or "" when
// every name is unique. Json::parse keeps one member per name, so the names
// are counted on nlohmann's SAX events of the same text (already parsed once,
// so it is well-formed).
class TopLevelNames final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string duplicate;

  bool null() override { return true; }
  bool boolean(bool /*value*/) override { return true; }
  bool number_integer(number_integer_t /*value*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*value*/) override { return true; }
  bool number_float(number_float_t /*value*/, const string_t& /*text*/) override { return true; }
  bool string(string_t& /*value*/) override { return true; }
  bool binary(binary_t& /*value*/) override { return true; }
  bool start_object(std::size_t /*elements*/) override {
    ++depth_;
    return true;
  }
  bool key(string_t& name) override {
    if (depth_ != 1 || names_.insert(name).second) return true;
    duplicate = name;
    return false;  // stop: one duplicate is enough to refuse the file
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t /*elements*/) override {
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*error*/) override {
    return false;
  }

 private:
  int depth_ = 0;
  std::set<std::string> names_;
};

constexpr std::string_view kTiling =
    " The format requires the tensors' byte ranges, sorted by offset, to fill the data from byte 0 to its end, "
    "without gaps or overlaps.";

std::string range_of(const SafetensorsEntry& entry) {
  return "[" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + ")";
}

// The tensors, sorted by offset, must tile the data section exactly: no byte
// before, between or after them that belongs to no tensor, and none that
// belongs to two.
void check_tiling(const std::vector<SafetensorsEntry>& entries, std::uint64_t data_bytes, std::string_view file) {
  std::vector<const SafetensorsEntry*> sorted;
  sorted.reserve(entries.size());
  for (const SafetensorsEntry& entry : entries) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  std::uint64_t covered = 0;  // the data before this offset belongs to the tensors seen so far
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry* entry : sorted) {
    if (entry->begin < covered) {
      fail(file, "tensor '" + entry->name + "' at data offsets " + range_of(*entry) + " overlaps tensor '" +
                     previous->name + "' at " + range_of(*previous) + "." + std::string(kTiling) +
                     std::string(kDamaged));
    }
    if (entry->begin > covered) {
      fail(file, "tensor '" + entry->name + "' starts at byte " + std::to_string(entry->begin) + " of the data, " +
                     (previous == nullptr ? std::string("but it is the first by offset and the data starts at byte 0")
                                          : "but the tensor before it ('" + previous->name + "') ends at byte " +
                                                std::to_string(covered)) +
                     ": " + std::to_string(entry->begin - covered) + " bytes belong to no tensor." +
                     std::string(kTiling) + std::string(kDamaged));
    }
    covered = entry->end;
    previous = entry;
  }
  if (covered < data_bytes) {
    fail(file, (previous == nullptr ? std::string("the header lists no tensor")
                                    : "the last tensor ('" + previous->name + "') ends at byte " +
                                          std::to_string(covered) + " of the data") +
                   ", but the file holds " + std::to_string(data_bytes) + " bytes of data: the " +
                   std::to_string(data_bytes - covered) + " bytes after it belong to no tensor." +
                   std::string(kTiling) + std::string(kDamaged));
  }
}

// "__metadata__" is a map of strings to strings.
void check_metadata(const Json& metadata, std::string_view file) {
  if (!metadata.is_object()) {
    fail(file, "\"__metadata__\" is not a JSON object; the format requires a map of strings to strings." +
                   std::string(kDamaged));
  }
  for (const auto& [key, value] : metadata.object()) {
    if (!value.is_string()) {
      fail(file, "the value of '" + key +
                     "' in \"__metadata__\" is not a string; the format requires metadata to map strings to "
                     "strings." +
                     std::string(kDamaged));
    }
  }
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
  TopLevelNames names;
  nlohmann::json::sax_parse(text.begin(), text.end(), &names, nlohmann::detail::input_format_t::json,
                            /*strict=*/true);
  if (!names.duplicate.empty()) {
    fail(file, "the header names '" + names.duplicate +
                   "' twice; the format requires every tensor name (and \"__metadata__\") to appear once." +
                   std::string(kDamaged));
  }
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, info] : header.object()) {
    if (name == "__metadata__") {
      check_metadata(info, file);
      continue;
    }
    entries.push_back(parse_entry(name, info, data_bytes, file));
  }
  check_tiling(entries, data_bytes, file);
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
