// Writes the inputs of the checkpoint_h5 harness.
//
//   fuzz_make_checkpoint_seed <file.h5>
//       a small checkpoint made by the library, with each kind of entry
//       (replicated model tensors, a per-rank tensor, per-rank bytes) and an
//       attribute. The writer reserves a 1 MiB metadata block; h5repack packs
//       the file to a few kilobytes (tests/fuzz/corpus/checkpoint_h5/state.h5).
//   fuzz_make_checkpoint_seed --damage <mode> <file.h5>
//       damages a copy of that seed in place, the way a broken or hostile file
//       would, for the regression inputs (tests/fuzz/regressions/checkpoint_h5/):
//       missing_row_checksums, unknown_kind, long_row_length, null_attribute,
//       huge_dimensions.
#include <hdf5.h>
#include <mpi.h>

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "accelerate/checkpoint/checkpoint_writer.hpp"
#include "accelerate/runtime/mpi_comm.hpp"

namespace {

void write_seed(const char* file) {
  namespace ckpt = accelerate::checkpoint;
  ckpt::CheckpointWriter writer({.comm = MPI_COMM_SELF, .file = file, .alignment = 1},
                                {.step = 3, .iteration = 4, .mixed_precision = "bf16"});
  writer.write_replicated("pytorch_model/weight", at::arange(6, at::kFloat).reshape({2, 3}));
  writer.write_replicated("pytorch_model/bias", at::tensor({1, 2}, at::kLong));
  writer.write_per_rank("random_states/cpu", at::arange(4, at::kByte));
  const std::string text = "loader state";
  writer.write_per_rank_bytes("custom_checkpoint_0", {reinterpret_cast<const std::byte*>(text.data()), text.size()});
  writer.set_attribute("scheduler", "last_epoch", std::int64_t{4});
  writer.close();
}

void string_attribute(hid_t object, const char* name, const char* value) {
  H5Adelete(object, name);
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, std::strlen(value));
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attribute = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attribute, type, value);
  H5Aclose(attribute);
  H5Sclose(space);
  H5Tclose(type);
}

bool damage(std::string_view mode, const char* file) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // deleting an absent attribute is expected
  const hid_t h5 = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
  if (h5 < 0) return false;
  bool known = true;
  if (mode == "missing_row_checksums") {  // a per-rank entry without its row checksums
    const hid_t dataset = H5Dopen2(h5, "random_states/cpu", H5P_DEFAULT);
    H5Adelete(dataset, "row_crc32c");
    H5Dclose(dataset);
  } else if (mode == "unknown_kind") {  // an entry kind no version writes
    const hid_t dataset = H5Dopen2(h5, "pytorch_model/bias", H5P_DEFAULT);
    string_attribute(dataset, "kind", "bogus");
    H5Dclose(dataset);
  } else if (mode == "long_row_length") {  // a per-rank bytes row longer than the dataset's rows
    const hid_t dataset = H5Dopen2(h5, "custom_checkpoint_0", H5P_DEFAULT);
    const std::int64_t length = std::int64_t{1} << 40;
    const hid_t attribute = H5Aopen(dataset, "lengths", H5P_DEFAULT);
    H5Awrite(attribute, H5T_NATIVE_INT64, &length);
    H5Aclose(attribute);
    H5Dclose(dataset);
  } else if (mode == "null_attribute") {  // a root attribute with a null dataspace: no value at all
    H5Adelete(h5, "step");
    const hid_t space = H5Screate(H5S_NULL);
    H5Aclose(H5Acreate2(h5, "step", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(space);
  } else if (mode == "huge_dimensions") {  // a model tensor declaring 4 TiB, storing nothing
    const hsize_t dims[1] = {hsize_t{1} << 40};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t creation = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(creation, H5D_CONTIGUOUS);
    H5Pset_alloc_time(creation, H5D_ALLOC_TIME_LATE);
    const hid_t dataset =
        H5Dcreate2(h5, "pytorch_model/huge", H5T_IEEE_F32LE, space, H5P_DEFAULT, creation, H5P_DEFAULT);
    string_attribute(dataset, "dtype", "float32");
    string_attribute(dataset, "kind", "replicated");
    H5Dclose(dataset);
    H5Pclose(creation);
    H5Sclose(space);
  } else {
    known = false;
  }
  return H5Fclose(h5) >= 0 && known;
}

}  // namespace

int main(int argc, char** argv) {
  const bool damaging = argc == 4 && std::string_view(argv[1]) == "--damage";
  if (argc != 2 && !damaging) {
    std::fprintf(stderr, "usage: fuzz_make_checkpoint_seed <file.h5>\n"
                         "       fuzz_make_checkpoint_seed --damage <mode> <file.h5>\n");
    return 2;
  }
  if (damaging) {
    if (damage(argv[2], argv[3])) return 0;
    std::fprintf(stderr, "fuzz_make_checkpoint_seed: cannot damage '%s' with '%s'\n", argv[3], argv[2]);
    return 1;
  }
  MPI_Init(&argc, &argv);
  write_seed(argv[1]);
  MPI_Finalize();
  return 0;
}
