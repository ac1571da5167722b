#include "accelerate/checkpoint/safetensors.hpp"

#include <mpi.h>
#include <torch/utils.h>

#include <ATen/ATen.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>

#include "accelerate/checkpoint/checkpoint_directory.hpp"
#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "checkpoint/host_tensor.hpp"
#include "checkpoint/safetensors_format.hpp"
#include "detail/dtype_names.hpp"
#include "detail/json.hpp"
#include "detail/mpi_runtime.hpp"

namespace accelerate::checkpoint {

namespace fs = std::filesystem;
using accelerate::detail::Json;

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw ConfigError(accelerate::detail::where() + " safetensors: " + what);
}

std::string code_of(at::ScalarType type, const std::string& name) {
  if (const auto code = accelerate::detail::dtype_name(type, accelerate::detail::DtypeFormat::safetensors)) {
    return std::string(*code);
  }
  fail("tensor '" + name + "' has dtype " + std::string(c10::toString(type)) + ", which safetensors cannot store.");
}

at::ScalarType type_of(const std::string& code, const fs::path& file) {
  if (const auto type = accelerate::detail::dtype_from_name(code, accelerate::detail::DtypeFormat::safetensors)) {
    return *type;
  }
  fail("'" + file.string() + "' uses dtype " + code + ", which this version cannot read.");
}

std::string dtype_name_of(at::ScalarType type) { return std::string(accelerate::detail::describe_dtype(type)); }

void write_file(const fs::path& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                const std::vector<std::size_t>& members) {
  Json::Object header;
  header["__metadata__"] = Json(Json::Object{{"format", Json("pt")}});
  std::int64_t offset = 0;
  for (const std::size_t i : members) {
    const auto& [name, tensor] = tensors[i];
    Json::Array shape;
    for (const auto size : tensor.sizes()) shape.push_back(Json(static_cast<std::int64_t>(size)));
    const auto bytes = static_cast<std::int64_t>(tensor.numel() * tensor.element_size());
    header[name] = Json(Json::Object{{"dtype", Json(code_of(tensor.scalar_type(), name))},
                                     {"shape", Json(std::move(shape))},
                                     {"data_offsets", Json(Json::Array{Json(offset), Json(offset + bytes)})}});
    offset += bytes;
  }
  std::string text = Json(std::move(header)).dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::uint64_t length = text.size();
  std::array<char, 8> prefix{};
  for (int b = 0; b < 8; ++b) prefix[static_cast<std::size_t>(b)] = static_cast<char>((length >> (8 * b)) & 0xFF);
  out.write(prefix.data(), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const std::size_t i : members) {
    const at::Tensor data = detail::host_contiguous(tensors[i].second);
    out.write(static_cast<const char*>(data.data_ptr()), static_cast<std::streamsize>(data.nbytes()));
  }
  out.flush();
  if (!out) fail("cannot write '" + path.string() + "'. Check the directory exists and has space.");
}

}  // namespace

std::vector<fs::path> save_model(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                 const fs::path& directory, const SaveModelOptions& options) {
  if (!options.safe_serialization) {
    fail("safe_serialization=false (pickled " + std::string(WEIGHTS_NAME) +
         ") is not supported from C++; use safe_serialization=true.");
  }
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    if (!names.insert(name).second) fail("tensor name '" + name + "' appears twice.");
    code_of(tensor.scalar_type(), name);
  }
  fs::create_directories(directory);
  // Greedy sharding in the given order, as Accelerate's shard_checkpoint does.
  std::vector<std::vector<std::size_t>> shards(1);
  std::uint64_t current = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(tensors[i].second.nbytes());
    if (!shards.back().empty() && current + bytes > options.max_shard_size) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(i);
    current += bytes;
  }
  std::vector<fs::path> written;
  if (shards.size() == 1) {
    written.push_back(directory / SAFE_WEIGHTS_NAME);
    write_file(written.back(), tensors, shards.front());
    return written;
  }
  Json::Object weight_map;
  std::int64_t total = 0;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    written.push_back(directory / name);
    write_file(written.back(), tensors, shards[s]);
    for (const std::size_t i : shards[s]) {
      weight_map[tensors[i].first] = Json(std::string(name));
      total += static_cast<std::int64_t>(tensors[i].second.nbytes());
    }
  }
  const Json index(Json::Object{{"metadata", Json(Json::Object{{"total_size", Json(total)}})},
                                {"weight_map", Json(std::move(weight_map))}});
  written.push_back(directory / SAFE_WEIGHTS_INDEX_NAME);
  std::ofstream(written.back()) << index.dump() << "\n";
  return written;
}

void save_safetensors(const std::vector<std::pair<std::string, at::Tensor>>& tensors, const fs::path& file) {
  std::set<std::string> names;
  std::vector<std::size_t> members;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!names.insert(tensors[i].first).second) fail("tensor name '" + tensors[i].first + "' appears twice.");
    code_of(tensors[i].second.scalar_type(), tensors[i].first);
    members.push_back(i);
  }
  write_file(file, tensors, members);
}

std::map<std::string, at::Tensor> load_safetensors(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::error_code error;
  const auto file_size = fs::file_size(file, error);
  if (!in || error) fail("cannot open '" + file.string() + "'" + (error ? ": " + error.message() : "") + ".");
  std::array<char, 8> prefix{};
  in.read(prefix.data(), 8);
  const std::uint64_t length =
      detail::safetensors_header_length(std::string_view(prefix.data(), static_cast<std::size_t>(in.gcount())),
                                        file_size, file.string());
  std::string text(length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(length));
  if (!in) fail("'" + file.string() + "' is truncated (its header).");
  const std::uint64_t data_start = 8 + length;
  std::map<std::string, at::Tensor> result;
  for (const auto& entry : detail::parse_safetensors_header(text, file_size - data_start, file.string())) {
    at::Tensor tensor = at::empty(entry.shape, at::TensorOptions().dtype(type_of(entry.dtype, file)));
    in.seekg(static_cast<std::streamoff>(data_start + entry.begin));
    in.read(static_cast<char*>(tensor.data_ptr()), static_cast<std::streamsize>(entry.end - entry.begin));
    if (!in) fail("'" + file.string() + "' is truncated (tensor '" + entry.name + "').");
    result.emplace(entry.name, std::move(tensor));
  }
  return result;
}

namespace {

// What a checkpoint path names: one of our HDF5 state files, or safetensors
// files (one, or the shards an index lists).
struct CheckpointFiles {
  fs::path state_file;          // set for an HDF5 checkpoint
  std::vector<fs::path> files;  // the .safetensors files otherwise
};

CheckpointFiles resolve_checkpoint(const fs::path& checkpoint) {
  // Our own HDF5 checkpoints: a checkpoint directory or its state file.
  fs::path state_file = checkpoint;
  if (fs::is_directory(checkpoint)) {
    // One file per checkpoint, or (save_on_each_node) one per node, all alike.
    state_file = checkpoint / STATE_FILE_NAME;
    const fs::path first_node = checkpoint / state_file_name(true, 0);
    if (!fs::exists(state_file) && fs::exists(first_node)) state_file = first_node;
  }
  if (state_file.extension() == ".h5" && fs::exists(state_file)) {
#if ACCELERATE_HAVE_HDF5
    if (!accelerate::detail::mpi_is_running()) {
      fail("reading the HDF5 checkpoint '" + state_file.string() +
           "' needs MPI (MPI-IO): create an accelerate::State first.");
    }
    return {state_file, {}};
#else
    throw FeatureNotBuilt("load_checkpoint_in_model: '" + state_file.string() +
                          "' is an HDF5 checkpoint, but this build has no HDF5 (configure with "
                          "-DACCELERATE_WITH_HDF5=ON).");
#endif
  }
  CheckpointFiles resolved;
  fs::path index;
  if (fs::is_directory(checkpoint)) {
    if (fs::exists(checkpoint / SAFE_WEIGHTS_NAME)) {
      resolved.files.push_back(checkpoint / SAFE_WEIGHTS_NAME);
    } else {
      for (const auto& entry : fs::directory_iterator(checkpoint)) {
        if (entry.path().string().ends_with(".index.json")) {
          if (!index.empty()) fail("'" + checkpoint.string() + "' holds more than one .index.json; pass one of them.");
          index = entry.path();
        }
      }
      if (index.empty())
        fail("'" + checkpoint.string() + "' holds neither " + std::string(SAFE_WEIGHTS_NAME) + " nor an .index.json.");
    }
  } else if (checkpoint.string().ends_with(".json")) {
    index = checkpoint;
  } else {
    resolved.files.push_back(checkpoint);
  }
  if (!index.empty()) {
    std::ifstream in(index);
    std::error_code error;
    if (!in || fs::file_size(index, error) > detail::kMaxSafetensorsIndexBytes || error) {
      fail("cannot read '" + index.string() + "' (missing, unreadable, or larger than an index can be).");
    }
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const std::string& shard : detail::parse_safetensors_index(text, index.string())) {
      resolved.files.push_back(index.parent_path() / shard);
    }
  }
  return resolved;
}

}  // namespace

KeyReport load_checkpoint_in_model(const std::map<std::string, at::Tensor>& destinations, const fs::path& checkpoint,
                                   bool strict) {
  const CheckpointFiles resolved = resolve_checkpoint(checkpoint);
#if ACCELERATE_HAVE_HDF5
  if (!resolved.state_file.empty()) {
    CheckpointReader reader({.comm = MPI_COMM_SELF, .file = resolved.state_file});
    torch::NoGradGuard no_grad;
    return reader.load_into(MODEL_NAME, destinations, strict);
  }
#endif
  std::map<std::string, at::Tensor> loaded;
  for (const fs::path& file : resolved.files) loaded.merge(load_safetensors(file));

  std::vector<TensorSpec> expected;
  for (const auto& [name, tensor] : destinations) {
    expected.push_back({name, dtype_name_of(tensor.scalar_type()), tensor.sizes().vec()});
  }
  std::vector<TensorSpec> found;
  for (const auto& [name, tensor] : loaded)
    found.push_back({name, dtype_name_of(tensor.scalar_type()), tensor.sizes().vec()});
  KeyReport report = compare_keys(expected, found);
  if (strict && !report.empty()) {
    fail("'" + checkpoint.string() + "' does not match the model (strict loading):\n" + report.to_string() +
         "Load with strict=false to load the matching entries only.");
  }
  std::set<std::string> skip(report.missing.begin(), report.missing.end());
  for (const KeyMismatch& mismatch : report.mismatched) skip.insert(mismatch.name);
  for (const auto& [name, tensor] : destinations) {
    if (skip.count(name) == 0) tensor.copy_(loaded.at(name));
  }
  return report;
}

void for_each_model_tensor(const fs::path& checkpoint,
                           const std::function<void(const std::string& name, const at::Tensor& tensor)>& visit) {
  const CheckpointFiles resolved = resolve_checkpoint(checkpoint);
#if ACCELERATE_HAVE_HDF5
  if (!resolved.state_file.empty()) {
    CheckpointReader reader({.comm = MPI_COMM_SELF, .file = resolved.state_file});
    const std::string prefix = std::string(MODEL_NAME) + "/";
    for (const EntryInfo& info : reader.entries(MODEL_NAME)) {
      if (info.kind != EntryKind::Replicated) continue;
      visit(info.spec.name.substr(prefix.size()), reader.read_replicated(info.spec.name));
    }
    return;
  }
#endif
  // One file in memory at a time: a shard of a sharded model.
  for (const fs::path& file : resolved.files) {
    for (const auto& [name, tensor] : load_safetensors(file)) visit(name, tensor);
  }
}

}  // namespace accelerate::checkpoint
