#include "accelerate/modeling/offload.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <bit>
#include <fstream>
#include <sstream>
#include <utility>

#include "accelerate/error.hpp"
#include "accelerate/modeling/module_tensors.hpp"
#include "checkpoint/json.hpp"

namespace accelerate {
namespace {

namespace fs = std::filesystem;
using checkpoint::detail::Json;

// numpy's name of each dtype an offload folder may hold; bf16, which numpy
// lacks, is written as its bits and named "bfloat16", as Accelerate does.
constexpr std::array<std::pair<c10::ScalarType, std::string_view>, 12> kDtypeNames{{
    {c10::ScalarType::Float, "float32"},
    {c10::ScalarType::Double, "float64"},
    {c10::ScalarType::Half, "float16"},
    {c10::ScalarType::BFloat16, "bfloat16"},
    {c10::ScalarType::Char, "int8"},
    {c10::ScalarType::Byte, "uint8"},
    {c10::ScalarType::Short, "int16"},
    {c10::ScalarType::Int, "int32"},
    {c10::ScalarType::Long, "int64"},
    {c10::ScalarType::Bool, "bool"},
    {c10::ScalarType::ComplexFloat, "complex64"},
    {c10::ScalarType::ComplexDouble, "complex128"},
}};

static_assert(std::endian::native == std::endian::little, "offload files hold little-endian elements");

[[noreturn]] void offload_error(const std::string& what) { throw ConfigError(detail::where() + " offload: " + what); }

std::string_view dtype_name(c10::ScalarType type) {
  for (const auto& [scalar, name] : kDtypeNames) {
    if (scalar == type) return name;
  }
  offload_error(std::string("cannot offload a tensor of dtype ") + c10::toString(type) +
                "; the offload format holds numpy's dtypes and bfloat16");
}

c10::ScalarType dtype_of(const std::string& name, const fs::path& source) {
  for (const auto& [scalar, known] : kDtypeNames) {
    if (known == name) return scalar;
  }
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

}  // namespace

void offload_weight(const at::Tensor& weight, const std::string& name, const fs::path& folder, OffloadIndex* index) {
  (void)dtype_name(weight.scalar_type());  // a dtype the format lacks is refused before the file is touched
  const at::Tensor host = weight.detach().to(at::kCPU).contiguous();
  const fs::path file = weight_file(folder, name);
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(host.data_ptr()), static_cast<std::streamsize>(host.nbytes()));
  out.close();
  if (!out) offload_error("could not write " + file.string());
  if (index != nullptr) (*index)[name] = {weight.scalar_type(), weight.sizes().vec()};
}

at::Tensor load_offloaded_weight(const fs::path& file, const OffloadedWeight& info) {
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
