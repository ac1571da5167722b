// Fuzz target: `accelerate-hpc inspect` and `convert` on a checkpoint whose
// structure is damaged. HDF5 checksums its own metadata, so random bytes
// mostly end in HDF5's checksum errors (checkpoint_h5); here the input is a
// program of edits that HDF5 applies to a copy of the valid seed: attributes
// deleted, replaced by other types, sizes or values, emptied, and datasets
// added that declare any shape. Property: as for checkpoint_h5.
//
// Input: a sequence of 4-byte edits [op, object, attribute, n] each followed
// by n bytes of value (the value is as long as the input allows).
#include <hdf5.h>

#include <array>
#include <cstring>
#include <fstream>
#include <iterator>

#include "checkpoint_run.hpp"

namespace {

std::string seed;  // tests/fuzz/corpus/checkpoint_h5/state.h5

constexpr std::array<const char*, 5> kObjects{"/", "pytorch_model/weight", "pytorch_model/bias", "random_states/cpu",
                                              "custom_checkpoint_0"};
constexpr std::array<const char*, 14> kAttributes{"dtype",  "kind",       "crc32c", "row_crc32c", "lengths",
                                                  "format", "format_version", "step", "iteration", "world_size",
                                                  "num_nodes", "created", "library_version", "mixed_precision"};

std::int64_t int64_of(std::string_view value) {
  std::int64_t number = 0;
  std::memcpy(&number, value.data(), std::min(value.size(), sizeof number));
  return number;
}

void write_attribute(hid_t object, const char* name, hid_t file_type, hid_t memory_type, hid_t space,
                     const void* data) {
  H5Adelete(object, name);
  const hid_t attribute = H5Acreate2(object, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (attribute < 0) return;
  if (data != nullptr) H5Awrite(attribute, memory_type, data);
  H5Aclose(attribute);
}

// Applies one edit; `value` is its argument bytes.
void apply(hid_t file, std::uint8_t op, std::uint8_t object_index, std::uint8_t attribute_index,
           std::string_view value) {
  const char* path = kObjects[object_index % kObjects.size()];
  const char* name = kAttributes[attribute_index % kAttributes.size()];
  const hid_t object = H5Oopen(file, path, H5P_DEFAULT);
  if (object < 0) return;
  switch (op % 7) {
    case 0:  // delete
      H5Adelete(object, name);
      break;
    case 1: {  // an int64 scalar
      const std::int64_t number = int64_of(value);
      const hid_t space = H5Screate(H5S_SCALAR);
      write_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space, &number);
      H5Sclose(space);
      break;
    }
    case 2: {  // an int64 vector, one value per 8 bytes
      std::vector<std::int64_t> numbers(value.size() / 8);
      std::memcpy(numbers.data(), value.data(), numbers.size() * 8);
      const hsize_t dims[1] = {numbers.size()};
      const hid_t space = H5Screate_simple(1, dims, nullptr);
      write_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, space, numbers.data());
      H5Sclose(space);
      break;
    }
    case 3: {  // a fixed-length string
      const std::string text = value.empty() ? std::string(1, '\0') : std::string(value);
      const hid_t type = H5Tcopy(H5T_C_S1);
      H5Tset_size(type, text.size());
      const hid_t space = H5Screate(H5S_SCALAR);
      write_attribute(object, name, type, type, space, text.data());
      H5Sclose(space);
      H5Tclose(type);
      break;
    }
    case 4: {  // no value at all (a null dataspace), of an integer or a string type
      const hid_t space = H5Screate(H5S_NULL);
      write_attribute(object, name, value.empty() || value[0] % 2 == 0 ? H5T_STD_I64LE : H5T_C_S1, H5T_NATIVE_INT64,
                      space, nullptr);
      H5Sclose(space);
      break;
    }
    case 5: {  // a double, where an integer or a string is expected
      double number = 0;
      std::memcpy(&number, value.data(), std::min(value.size(), sizeof number));
      const hid_t space = H5Screate(H5S_SCALAR);
      write_attribute(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space, &number);
      H5Sclose(space);
      break;
    }
    default: {  // a new dataset under pytorch_model/ declaring the shape in `value`, storing nothing
      std::vector<hsize_t> dims;
      for (std::size_t at = 0; at + 8 <= value.size() && dims.size() < 4; at += 8) {
        dims.push_back(static_cast<hsize_t>(int64_of(value.substr(at))) & ((hsize_t{1} << 62) - 1));
      }
      const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
      const hid_t creation = H5Pcreate(H5P_DATASET_CREATE);
      H5Pset_alloc_time(creation, H5D_ALLOC_TIME_LATE);
      const std::string dataset_name = "pytorch_model/added" + std::to_string(attribute_index);
      const hid_t dataset =
          H5Dcreate2(file, dataset_name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, creation, H5P_DEFAULT);
      if (dataset >= 0) {
        const hid_t type = H5Tcopy(H5T_C_S1);
        H5Tset_size(type, 8);
        const hid_t scalar = H5Screate(H5S_SCALAR);
        write_attribute(dataset, "dtype", type, type, scalar, "float32");
        const char* kind = object_index % 3 == 0 ? "replicated" : object_index % 3 == 1 ? "per_rank" : "per_rank_bytes";
        H5Tset_size(type, std::strlen(kind));
        write_attribute(dataset, "kind", type, type, scalar, kind);
        H5Sclose(scalar);
        H5Tclose(type);
        H5Dclose(dataset);
      }
      H5Pclose(creation);
      if (space >= 0) H5Sclose(space);
      break;
    }
  }
  H5Oclose(object);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  accelerate::fuzz::initialize_checkpoint_harness();
  std::ifstream in(ACCELERATE_FUZZ_CHECKPOINT_SEED, std::ios::binary);
  seed.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (seed.empty()) accelerate::fuzz::finding("cannot read the seed " ACCELERATE_FUZZ_CHECKPOINT_SEED);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // edits that HDF5 refuses are simply not applied
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = accelerate::fuzz::checkpoint_file().string();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(seed.data(), static_cast<std::streamsize>(seed.size()));
  }
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) accelerate::fuzz::finding("cannot open the copy of the seed");
  const std::string_view program(reinterpret_cast<const char*>(data), size);
  for (std::size_t at = 0; at + 4 <= program.size() && at < 64 * 4;) {
    const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(program[at + i]); };
    const std::size_t length = std::min<std::size_t>(byte(3), program.size() - at - 4);
    apply(file, byte(0), byte(1), byte(2), program.substr(at + 4, length));
    at += 4 + length;
  }
  H5Fclose(file);
  accelerate::fuzz::run_checkpoint_commands();
  return 0;
}
