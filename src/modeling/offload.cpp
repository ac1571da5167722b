#include "accelerate/modeling/offload.hpp"

#include <ATen/ATen.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "accelerate/error.hpp"
#include "accelerate/modeling/module_tensors.hpp"
#include "detail/dtype_names.hpp"
#include "detail/json.hpp"

namespace accelerate {
namespace {

namespace fs = std::filesystem;
using accelerate::detail::Json;

static_assert(std::endian::native == std::endian::little, "offload files hold little-endian elements");

[[noreturn]] void offload_error(const std::string& what) { throw ConfigError(detail::where() + " offload: " + what); }

// numpy's names (the offload format is numpy memmaps), bf16 as "bfloat16", as Accelerate writes it.
std::string_view dtype_name(c10::ScalarType type) {
  if (const auto name = detail::dtype_name(type, detail::DtypeFormat::offload)) return *name;
  offload_error(std::string("cannot offload a tensor of dtype ") + c10::toString(type) +
                "; the offload format holds numpy's dtypes and bfloat16");
}

c10::ScalarType dtype_of(const std::string& name, const fs::path& source) {
  if (const auto type = detail::dtype_from_name(name, detail::DtypeFormat::offload)) return *type;
  offload_error(source.string() + ": unknown dtype '" + name + "'");
}

fs::path weight_file(const fs::path& folder, const std::string& name) {
  // A name is a file name in the folder: no path of its own.
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    offload_error("'" + name + "' cannot name a file of the offload folder");
  }
  return folder / (name + ".dat");
}

std::int64_t elements_of(const std::vector<std::int64_t>& shape) {
  std::int64_t count = 1;
  for (const std::int64_t extent : shape) count *= extent;
  return count;
}

// The process's umask, read without changing it (umask() would, for every
// thread at once): the "Umask:" line of /proc/self/status, else 022.
mode_t process_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  }
  return 022;
}

// The bytes `file` must hold for `info`, checked against its size.
std::uintmax_t checked_size(const fs::path& file, const OffloadedWeight& info) {
  std::error_code error;
  const auto bytes = fs::file_size(file, error);
  if (error) offload_error("cannot read " + file.string() + ": " + error.message());
  // A 0-d tensor is written as one element (numpy memmaps have a dimension).
  const std::int64_t count = std::max<std::int64_t>(elements_of(info.shape), info.shape.empty() ? 1 : 0);
  const auto expected = static_cast<std::uintmax_t>(count) * c10::elementSize(info.dtype);
  if (bytes != expected) {
    offload_error(file.string() + " holds " + std::to_string(bytes) + " bytes; index.json's dtype and shape say " +
                  std::to_string(expected));
  }
  return expected;
}

}  // namespace

void offload_weight(const at::Tensor& weight, const std::string& name, const fs::path& folder, OffloadIndex* index) {
  (void)dtype_name(weight.scalar_type());  // a dtype the format lacks is refused before the file is touched
  const at::Tensor host = weight.detach().to(at::kCPU).contiguous();
  const fs::path file = weight_file(folder, name);
  // Written beside, under a name no other writer picks, and renamed over: a
  // tensor mapped from the old file (even `weight` itself) keeps reading it,
  // and a failed write leaves it whole.
  std::string staged = file.string() + ".tmp-XXXXXX";
  const int fd = ::mkstemp(staged.data());
  if (fd < 0) offload_error("could not create a file beside " + file.string() + ": " + std::strerror(errno));
  const auto* data = static_cast<const char*>(host.data_ptr());
  std::size_t left = host.nbytes();
  bool written = true;
  while (left > 0 && written) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    written = n > 0;
    if (written) {
      data += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  // mkstemp makes the file 0600; give it the permissions a plain create would.
  written = ::fchmod(fd, 0666 & ~process_umask()) == 0 && written;
  written = ::close(fd) == 0 && written;
  std::error_code error;
  if (written) fs::rename(staged, file, error);
  if (!written || error) {
    fs::remove(staged, error);
    offload_error("could not write " + file.string());
  }
  if (index != nullptr) (*index)[name] = {weight.scalar_type(), weight.sizes().vec()};
}

at::Tensor map_offloaded_weight(const fs::path& file, const OffloadedWeight& info) {
  const std::uintmax_t bytes = checked_size(file, info);
  const auto options = at::TensorOptions().dtype(info.dtype);
  if (bytes == 0) return at::empty(info.shape, options);  // nothing to map
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) offload_error("cannot open " + file.string() + ": " + std::strerror(errno));
  // The file opened may have been replaced since its size was checked: map
  // only one of the size expected, or reads past its end would fault.
  struct stat status {};
  if (::fstat(fd, &status) != 0 || static_cast<std::uintmax_t>(status.st_size) != bytes) {
    ::close(fd);
    offload_error(file.string() + " changed while it was being mapped; map it again");
  }
  // Private and writable: the tensor may be changed (copied on write), the file never is.
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  const int mapping_errno = errno;
  ::close(fd);  // the mapping keeps the file
  if (data == MAP_FAILED) offload_error("cannot map " + file.string() + ": " + std::strerror(mapping_errno));
  try {
    return at::from_blob(
        data, info.shape, [bytes](void* mapped) { ::munmap(mapped, bytes); }, options);
  } catch (...) {
    ::munmap(data, bytes);
    throw;
  }
}

at::Tensor load_offloaded_weight(const fs::path& file, const OffloadedWeight& info) {
  const std::uintmax_t expected = checked_size(file, info);
  at::Tensor tensor = at::empty(info.shape, at::TensorOptions().dtype(info.dtype));
  std::ifstream in(file, std::ios::binary);
  in.read(static_cast<char*>(tensor.data_ptr()), static_cast<std::streamsize>(expected));
  if (!in) offload_error("could not read " + file.string());
  return tensor;
}

OffloadIndex load_offload_index(const fs::path& folder) {
  const fs::path file = folder / "index.json";
  OffloadIndex index;
  if (!fs::exists(file)) return index;
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const Json json = Json::parse(text.str(), file.string());
  for (const auto& [name, entry] : json.object()) {
    const Json* dtype = entry.find("dtype");
    const Json* shape = entry.find("shape");
    if (dtype == nullptr || shape == nullptr) offload_error(file.string() + ": '" + name + "' has no dtype or shape");
    OffloadedWeight weight{dtype_of(dtype->string(), file), {}};
    for (const Json& extent : shape->array()) {
      if (extent.integer() < 0) offload_error(file.string() + ": '" + name + "' has a negative extent");
      weight.shape.push_back(extent.integer());
    }
    index[name] = std::move(weight);
  }
  return index;
}

void save_offload_index(const OffloadIndex& index, const fs::path& folder) {
  if (index.empty()) return;
  OffloadIndex merged = load_offload_index(folder);
  for (const auto& [name, weight] : index) merged[name] = weight;
  Json::Object object;
  for (const auto& [name, weight] : merged) {
    Json::Array shape(weight.shape.begin(), weight.shape.end());
    object[name] = Json(Json::Object{{"dtype", Json(std::string(dtype_name(weight.dtype)))}, {"shape", Json(shape)}});
  }
  const fs::path file = folder / "index.json";
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << Json(object).dump();
  out.close();
  if (!out) offload_error("could not write " + file.string());
}

void offload_state_dict(const fs::path& folder, const std::map<std::string, at::Tensor>& state_dict) {
  fs::create_directories(folder);
  OffloadIndex index;
  for (const auto& [name, tensor] : state_dict) offload_weight(tensor, name, folder, &index);
  save_offload_index(index, folder);
}

void load_offloaded_weights(torch::nn::Module& model, const OffloadIndex& index, const fs::path& folder) {
  for (const auto& [name, info] : index) {
    set_module_tensor_to_device(model, name, at::kCPU, load_offloaded_weight(weight_file(folder, name), info));
  }
}

}  // namespace accelerate
