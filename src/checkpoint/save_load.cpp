#include "accelerate/checkpoint/save_load.hpp"

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <torch/serialize.h>

#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>
#include <vector>

#include "accelerate/checkpoint/safetensors.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate::checkpoint {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail_save_load(const std::string& what) { throw ConfigError(what); }

// torch.save's files (and torch::pickle_save's) are zip archives.
bool is_zip(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4;
}

void write_pickled(const std::map<std::string, at::Tensor>& tensors, const fs::path& file) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) dict.insert(name, tensor.cpu());
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out)
    fail_save_load("save: cannot write '" + file.string() + "'. Check that the directory exists and has space.");
}

std::map<std::string, at::Tensor> read_pickled(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const c10::Error& error) {
    fail_save_load("load: '" + file.string() + "' is a zip archive but not a torch.save file LibTorch can read (" +
                   error.what_without_backtrace() + ").");
  }
  if (!value.isGenericDict()) {
    fail_save_load("load: '" + file.string() + "' holds a " + value.tagKind() +
                   ", not a dict of named tensors; save it from a dict of tensors.");
  }
  std::map<std::string, at::Tensor> result;
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isTensor()) {
      fail_save_load("load: '" + file.string() + "' holds a dict whose entries are not all name -> tensor (one is " +
                     entry.key().tagKind() + " -> " + entry.value().tagKind() + ").");
    }
    result.emplace(entry.key().toStringRef(), entry.value().toTensor());
  }
  return result;
}

}  // namespace

bool save(const State& state, const std::map<std::string, at::Tensor>& tensors, const fs::path& file,
          const SaveOptions& options) {
  const bool writer = options.save_on_each_node ? state.is_local_main_process() : state.is_main_process();
  if (!writer) return false;
  // Beside the destination, then renamed over it: the old file stays whole
  // until the new one is.
  fs::path partial = file;
  partial += ".partial";
  try {
    if (options.safe_serialization) {
      save_safetensors({tensors.begin(), tensors.end()}, partial);
    } else {
      write_pickled(tensors, partial);
    }
  } catch (...) {
    std::error_code ignored;
    fs::remove(partial, ignored);
    throw;
  }
  std::error_code error;
  fs::rename(partial, file, error);
  if (error) {
    fail_save_load("save: cannot move '" + partial.string() + "' to '" + file.string() + "': " + error.message() + ".");
  }
  return true;
}

std::map<std::string, at::Tensor> load(const fs::path& file, std::optional<c10::Device> map_location) {
  std::error_code error;
  if (!fs::is_regular_file(file, error)) {
    fail_save_load("load: '" + file.string() + "' is not a file" + (error ? " (" + error.message() + ")" : "") + ".");
  }
  auto tensors = is_zip(file) ? read_pickled(file) : load_safetensors(file);
  if (map_location) {
    for (auto& [name, tensor] : tensors) tensor = tensor.to(*map_location);
  }
  return tensors;
}

}  // namespace accelerate::checkpoint
