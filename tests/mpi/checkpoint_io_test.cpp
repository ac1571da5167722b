// CheckpointWriter/CheckpointReader at 1, 2 and 4 ranks: round trips of
// every stored dtype and shape, per-rank rows, attributes, resharding onto
// sub-communicators, corruption detection, key reports, name agreement.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/checkpoint/checkpoint_writer.hpp"
#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "checkpoint/collective.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace ckpt = accelerate::checkpoint;
namespace fs = std::filesystem;
using accelerate::testing::error_of;
using accelerate::testing::world_rank;
using accelerate::testing::world_size;

namespace {

// A directory shared by all ranks, fresh for each test.
fs::path shared_directory(const std::string& test) {
  return accelerate::testing::shared_temp_directory("ckpt_io_" + test);
}

void cleanup(const fs::path& dir) { accelerate::testing::remove_shared_directory(dir); }

// Deterministic content of every dtype (same on every rank for the same seed).
at::Tensor sample(at::ScalarType type, at::IntArrayRef shape, int seed) {
  const auto count = c10::multiply_integers(shape);
  at::Tensor base = at::arange(static_cast<double>(count), at::kDouble).mul(0.37).add(seed).sin().mul(100);
  if (type == at::kBool) return base.gt(0).reshape(shape);
  return base.to(type).reshape(shape);
}

struct Case {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
};

std::vector<Case> cases() {
  return {
      {"float_2d", at::kFloat, {7, 5}},
      {"double_1d", at::kDouble, {13}},
      {"bf16_3d", at::kBFloat16, {2, 3, 4}},
      {"half_2d", at::kHalf, {6, 3}},
      {"int64_1d", at::kLong, {9}},
      {"bool_2d", at::kBool, {4, 4}},
      {"int8_1d", at::kChar, {5}},
      {"int32_1d", at::kInt, {3}},
      {"uint8_1d", at::kByte, {3}},
      {"int16_1d", at::kShort, {3}},
      {"scalar_0d", at::kFloat, {}},
      {"empty", at::kFloat, {0, 4}},
      // Above the split threshold: written and read in per-rank shares, with
      // share boundaries that do not fall on row boundaries.
      {"large_float", at::kFloat, {1031, 517}},
      {"large_bf16", at::kBFloat16, {3, 700001}},
  };
}

void write_sample_file(MPI_Comm comm, const fs::path& file, int seed) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  ckpt::CheckpointWriter writer({.comm = comm, .file = file}, {.step = 42, .iteration = 3, .mixed_precision = "bf16"});
  for (const Case& c : cases()) writer.write_replicated("model/" + c.name, sample(c.type, c.shape, seed));
  // Per-rank: each rank's row differs.
  writer.write_per_rank("rng/state", sample(at::kLong, {6}, 1000 + rank));
  writer.write_per_rank("rng/scalar", sample(at::kDouble, {}, 2000 + rank));
  const std::string blob(static_cast<std::size_t>(3 + 5 * rank), static_cast<char>('a' + rank));
  writer.write_per_rank_bytes("loader/state", std::as_bytes(std::span(blob.data(), blob.size())));
  writer.set_attribute("scheduler", "state", std::string(R"({"last_epoch": 7, "lr": [0.1]})"));
  writer.set_attribute("scheduler", "last_epoch", std::int64_t{7});
  writer.set_attribute("", "user_flag", true);
  writer.set_attribute("optimizer/param_groups/0", "lr", 0.001);
  writer.set_attribute("optimizer/param_groups/0", "betas", std::vector<double>{0.9, 0.999});
  writer.close();
}

void expect_replicated_round_trip(MPI_Comm comm, const fs::path& file, int seed) {
  ckpt::CheckpointReader reader({.comm = comm, .file = file});
  for (const Case& c : cases()) {
    const at::Tensor got = reader.read_replicated("model/" + c.name);
    const at::Tensor want = sample(c.type, c.shape, seed);
    EXPECT_EQ(got.scalar_type(), c.type) << c.name;
    EXPECT_EQ(got.sizes(), want.sizes()) << c.name;
    EXPECT_TRUE(at::equal(got, want)) << c.name;
  }
}

TEST(CheckpointIo, RoundTripOfEveryDtypeAndShape) {
  const fs::path dir = shared_directory("roundtrip");
  const fs::path file = dir / "state.h5";
  write_sample_file(MPI_COMM_WORLD, file, 5);
  expect_replicated_round_trip(MPI_COMM_WORLD, file, 5);

  ckpt::CheckpointReader reader({.comm = MPI_COMM_WORLD, .file = file});
  const auto& header = reader.header();
  EXPECT_EQ(header.format, ckpt::FORMAT_NAME);
  EXPECT_EQ(header.format_version, ckpt::FORMAT_VERSION);
  EXPECT_EQ(header.world_size, world_size());
  EXPECT_EQ(header.step, 42);
  EXPECT_EQ(header.iteration, 3);
  EXPECT_EQ(header.mixed_precision, "bf16");
  EXPECT_EQ(header.created.size(), 20U) << header.created;

  // Per-rank rows come back to their owners.
  const int rank = world_rank();
  EXPECT_TRUE(at::equal(reader.read_per_rank("rng/state"), sample(at::kLong, {6}, 1000 + rank)));
  EXPECT_TRUE(at::equal(reader.read_per_rank("rng/scalar"), sample(at::kDouble, {}, 2000 + rank)));
  const auto blob = reader.read_per_rank_bytes("loader/state");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(blob.data()), blob.size()),
            std::string(static_cast<std::size_t>(3 + 5 * rank), static_cast<char>('a' + rank)));
  EXPECT_EQ(reader.entry("rng/state").rows, world_size());
  EXPECT_EQ(reader.entry("rng/state").spec.shape, (std::vector<int64_t>{6}));

  // Attributes of every kind.
  EXPECT_EQ(std::get<std::string>(*reader.attribute("scheduler", "state")), R"({"last_epoch": 7, "lr": [0.1]})");
  EXPECT_EQ(std::get<std::int64_t>(*reader.attribute("scheduler", "last_epoch")), 7);
  EXPECT_EQ(std::get<bool>(*reader.attribute("", "user_flag")), true);
  EXPECT_EQ(std::get<double>(*reader.attribute("optimizer/param_groups/0", "lr")), 0.001);
  EXPECT_EQ(std::get<std::vector<double>>(*reader.attribute("optimizer/param_groups/0", "betas")),
            (std::vector<double>{0.9, 0.999}));
  EXPECT_FALSE(reader.attribute("scheduler", "absent").has_value());
  EXPECT_FALSE(reader.attribute("no/such/group", "x").has_value());

  // Entries listed by group, with dtype names.
  const auto model = reader.entries("model");
  EXPECT_EQ(model.size(), cases().size());
  EXPECT_EQ(reader.entry("model/bf16_3d").spec.dtype, "bfloat16");
  cleanup(dir);
}

TEST(CheckpointIo, ReadsIntoExistingTensors) {
  const fs::path dir = shared_directory("into");
  write_sample_file(MPI_COMM_WORLD, dir / "state.h5", 9);
  ckpt::CheckpointReader reader({.comm = MPI_COMM_WORLD, .file = dir / "state.h5"});
  at::Tensor target = at::zeros({1031, 517}, at::kFloat);
  const void* storage = target.data_ptr();
  reader.read_replicated_into("model/large_float", target);
  EXPECT_EQ(target.data_ptr(), storage);
  EXPECT_TRUE(at::equal(target, sample(at::kFloat, {1031, 517}, 9)));
  // A non-contiguous destination is filled through a copy.
  at::Tensor transposed = at::zeros({5, 7}, at::kFloat).t();
  reader.read_replicated_into("model/float_2d", transposed);
  EXPECT_TRUE(at::equal(transposed, sample(at::kFloat, {7, 5}, 9)));
  // Wrong shape: a clear error naming the entry.
  at::Tensor wrong = at::zeros({3}, at::kFloat);
  const std::string message = error_of([&] { reader.read_replicated_into("model/float_2d", wrong); });
  EXPECT_NE(message.find("model/float_2d"), std::string::npos) << message;
  EXPECT_NE(message.find("[7, 5]"), std::string::npos) << message;
  cleanup(dir);
}

// Write on the whole world, read on the first half / on rank 0 alone, and
// write on the first two ranks, read on all (resharding within one job).
TEST(CheckpointIo, ReshardsOntoOtherRankCounts) {
  const fs::path dir = shared_directory("reshard");
  const int rank = world_rank();
  const int size = world_size();
  write_sample_file(MPI_COMM_WORLD, dir / "world.h5", 11);

  for (const int readers : {size / 2, 1}) {
    if (readers < 1) continue;
    MPI_Comm sub = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, rank < readers ? 0 : MPI_UNDEFINED, rank, &sub);
    if (sub != MPI_COMM_NULL) {
      expect_replicated_round_trip(sub, dir / "world.h5", 11);
      ckpt::CheckpointReader reader({.comm = sub, .file = dir / "world.h5"});
      EXPECT_EQ(reader.per_rank_source_row(), rank);  // rows of existing ranks go to the same rank
      EXPECT_TRUE(at::equal(reader.read_per_rank("rng/state"), sample(at::kLong, {6}, 1000 + rank)));
      // Any row can be read explicitly, e.g. to merge the states of dropped ranks.
      EXPECT_TRUE(at::equal(reader.read_per_rank("rng/state", size - 1), sample(at::kLong, {6}, 1000 + size - 1)));
      MPI_Comm_free(&sub);
    }
  }

  if (size >= 2) {
    MPI_Comm writers = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &writers);
    if (writers != MPI_COMM_NULL) {
      write_sample_file(writers, dir / "two.h5", 12);
      MPI_Comm_free(&writers);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    expect_replicated_round_trip(MPI_COMM_WORLD, dir / "two.h5", 12);
    ckpt::CheckpointReader reader({.comm = MPI_COMM_WORLD, .file = dir / "two.h5"});
    EXPECT_EQ(reader.per_rank_source_row(), rank % 2);  // documented rule: rank % saved world size
    EXPECT_TRUE(at::equal(reader.read_per_rank("rng/state"), sample(at::kLong, {6}, 1000 + rank % 2)));
  }
  cleanup(dir);
}

// Overwrites two bytes of dataset `name` of `file` at byte `at` of its data (rank 0 only).
void damage_dataset(const fs::path& file, const std::string& name, std::uint64_t at) {
  if (world_rank() != 0) return;
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  ASSERT_NE(offset, HADDR_UNDEF);
  std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
  stream.seekp(static_cast<std::streamoff>(offset + at));
  const char garbage[2] = {'\x5a', '\x11'};
  stream.write(garbage, sizeof garbage);
}

// Flip bytes inside one dataset of a real file: the read fails on every rank
// with an error naming the file and the dataset.
TEST(CheckpointIo, CorruptionNamesFileAndDataset) {
  const fs::path dir = shared_directory("corrupt");
  const fs::path file = dir / "state.h5";
  write_sample_file(MPI_COMM_WORLD, file, 3);
  damage_dataset(file, "model/large_float", 123457);
  MPI_Barrier(MPI_COMM_WORLD);
  ckpt::CheckpointReader reader({.comm = MPI_COMM_WORLD, .file = file});
  // Undamaged datasets still read.
  EXPECT_TRUE(at::equal(reader.read_replicated("model/float_2d"), sample(at::kFloat, {7, 5}, 3)));
  const std::string message =
      error_of<accelerate::Hdf5Error>([&] { (void)reader.read_replicated("model/large_float"); });
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("/model/large_float"), std::string::npos) << message;
  EXPECT_NE(message.find("corrupted"), std::string::npos) << message;
  cleanup(dir);
}

// Rank r's pieces of a tensor of `total` elements: every run of `run`
// elements whose index is r modulo the number of ranks (interleaved cuts,
// as a sharded optimizer's are), as views of `whole`.
std::vector<ckpt::TensorPiece> interleaved_pieces(const at::Tensor& whole, std::int64_t run, int rank, int size) {
  std::vector<ckpt::TensorPiece> pieces;
  const at::Tensor flat = whole.reshape({-1});
  for (std::int64_t k = 0, at = 0; at < flat.numel(); ++k, at += run) {
    if (k % size == rank) pieces.push_back({at, flat.narrow(0, at, std::min(run, flat.numel() - at))});
  }
  return pieces;
}

// Pieces written by every rank make one whole dataset: read whole (its
// checksum is the whole tensor's), read in another cut, and checked against damage.
TEST(CheckpointIo, PiecesOfEveryRankMakeOneDataset) {
  const fs::path dir = shared_directory("pieces");
  const fs::path file = dir / "state.h5";
  const at::Tensor whole = sample(at::kFloat, {5, 7}, 9);
  const at::Tensor large = sample(at::kDouble, {301, 53}, 4);  // many runs, rows cut mid-way
  {
    ckpt::CheckpointWriter writer({.comm = MPI_COMM_WORLD, .file = file}, {});
    writer.write_pieces("optimizer/whole", at::kFloat, whole.sizes(),
                        interleaved_pieces(whole, 3, world_rank(), world_size()));
    writer.write_pieces("optimizer/large", at::kDouble, large.sizes(),
                        interleaved_pieces(large, 1000, world_rank(), world_size()));
    writer.close();
  }
  ckpt::CheckpointReader reader({.comm = MPI_COMM_WORLD, .file = file});
  EXPECT_TRUE(at::equal(reader.read_replicated("optimizer/whole"), whole));
  EXPECT_TRUE(at::equal(reader.read_replicated("optimizer/large"), large));
  // Another cut: runs of 4 from the other end of the ranks.
  const int mirrored = world_size() - 1 - world_rank();
  at::Tensor got = at::full_like(whole, -1);
  reader.read_pieces("optimizer/whole", interleaved_pieces(got, 4, mirrored, world_size()));
  const at::Tensor mask = at::zeros({whole.numel()}, at::kBool);
  for (const auto& piece : interleaved_pieces(mask, 4, mirrored, world_size())) piece.data.fill_(true);
  EXPECT_TRUE(at::equal(got.reshape({-1}).masked_select(mask), whole.reshape({-1}).masked_select(mask)));
  EXPECT_TRUE(got.reshape({-1}).masked_select(mask.logical_not()).eq(-1).all().item<bool>());

  damage_dataset(file, "optimizer/large", 8 * 2000 + 3);
  MPI_Barrier(MPI_COMM_WORLD);
  ckpt::CheckpointReader damaged({.comm = MPI_COMM_WORLD, .file = file});
  at::Tensor into = at::empty_like(large);
  const std::string message = error_of<accelerate::Hdf5Error>(
      [&] { damaged.read_pieces("optimizer/large", interleaved_pieces(into, 777, world_rank(), world_size())); });
  EXPECT_NE(message.find("'/optimizer/large' is corrupted"), std::string::npos) << message;
  cleanup(dir);
}

// Pieces that leave a gap or overlap are refused on every rank, with the
// elements named, before anything is written or read.
TEST(CheckpointIo, PiecesThatDoNotTileTheTensorAreRefusedOnEveryRank) {
  const fs::path dir = shared_directory("pieces_bad");
  const fs::path file = dir / "state.h5";
  const at::Tensor whole = sample(at::kFloat, {4, 6}, 2);
  {
    ckpt::CheckpointWriter writer({.comm = MPI_COMM_WORLD, .file = file}, {});
    auto gap = interleaved_pieces(whole, 5, world_rank(), world_size());
    if (world_rank() == 0) gap.erase(gap.begin());  // elements 0 to 4 in no piece
    std::string message = error_of<accelerate::ConfigError>(
        [&] { writer.write_pieces("optimizer/gap", at::kFloat, whole.sizes(), gap); });
    EXPECT_NE(message.find("elements 0 to 4 are in no piece"), std::string::npos) << message;

    auto overlap = interleaved_pieces(whole, 5, world_rank(), world_size());
    if (world_rank() == 0) overlap.push_back({22, whole.reshape({-1}).narrow(0, 22, 2)});  // the last two again
    message = error_of<accelerate::ConfigError>(
        [&] { writer.write_pieces("optimizer/overlap", at::kFloat, whole.sizes(), overlap); });
    EXPECT_NE(message.find("is in two pieces"), std::string::npos) << message;

    auto outside = interleaved_pieces(whole, 5, world_rank(), world_size());
    if (world_rank() == world_size() - 1) outside.push_back({24, whole.reshape({-1}).narrow(0, 0, 1)});
    message = error_of<accelerate::ConfigError>(
        [&] { writer.write_pieces("optimizer/outside", at::kFloat, whole.sizes(), outside); });
    EXPECT_NE(message.find(world_rank() == world_size() - 1 ? "lies outside the tensor's 24" : "another rank's pieces"),
              std::string::npos)
        << message;
    writer.write_pieces("optimizer/good", at::kFloat, whole.sizes(),
                        interleaved_pieces(whole, 5, world_rank(), world_size()));
    writer.close();
  }
  ckpt::CheckpointReader reader({.comm = MPI_COMM_WORLD, .file = file});
  at::Tensor into = at::empty_like(whole);
  auto partial = interleaved_pieces(into, 6, world_rank(), world_size());
  if (world_rank() == world_size() - 1) partial.pop_back();  // the last run in no piece
  const std::string message = error_of<accelerate::ConfigError>([&] { reader.read_pieces("optimizer/good", partial); });
  EXPECT_NE(message.find("must cover its 24 elements exactly once, but they end at element 18"), std::string::npos)
      << message;
  reader.read_pieces("optimizer/good", interleaved_pieces(into, 6, world_rank(), world_size()));
  cleanup(dir);
}

// Ranks holding replicas of one cut (a shard copied on every node) read it
// once per copy: each copy must cover the entry exactly once and each is
// verified. Here every rank is a copy of its own and reads the whole entry.
TEST(CheckpointIo, PiecesReadInSeveralCopiesAreEachCheckedWhole) {
  const fs::path dir = shared_directory("pieces_copies");
  const fs::path file = dir / "state.h5";
  const at::Tensor large = sample(at::kDouble, {301, 53}, 6);
  {
    ckpt::CheckpointWriter writer({.comm = MPI_COMM_WORLD, .file = file}, {});
    writer.write_pieces("optimizer/large", at::kDouble, large.sizes(),
                        interleaved_pieces(large, 1000, world_rank(), world_size()));
    writer.close();
  }
  {
    ckpt::CheckpointReader reader({.comm = MPI_COMM_WORLD, .file = file});
    at::Tensor into = at::full_like(large, -1);
    reader.read_pieces("optimizer/large", interleaved_pieces(into, 1000, 0, 1), world_rank());
    EXPECT_TRUE(at::equal(into, large));
    // One copy short of its last run: refused on every rank, naming the copy.
    auto partial = interleaved_pieces(into, 1000, 0, 1);
    if (world_rank() == world_size() - 1) partial.pop_back();
    const std::string message =
        error_of<accelerate::ConfigError>([&] { reader.read_pieces("optimizer/large", partial, world_rank()); });
    EXPECT_NE(message.find("but they end at element 15000"), std::string::npos) << message;
    if (world_size() > 1) {
      EXPECT_NE(message.find("(copy " + std::to_string(world_size() - 1) + ")"), std::string::npos) << message;
    }
  }
  // Each copy's checksum is its own: copies whose bytes differ give their
  // own CRC-32C, on every rank, in copy order (here, one piece per copy).
  {
    const accelerate::detail::DeadlineComm comm(MPI_COMM_WORLD, std::chrono::seconds(60));
    const std::vector<ckpt::detail::PieceChecksum> mine{
        {.offset = 0, .count = 10, .crc = 1000U + static_cast<std::uint32_t>(world_rank()), .copy = world_rank()}};
    const auto checksums = ckpt::detail::combine_copy_checksums(comm, mine, 10, 4, "copies");
    ASSERT_EQ(checksums.size(), static_cast<std::size_t>(world_size()));
    for (int c = 0; c < world_size(); ++c) EXPECT_EQ(checksums[c], 1000U + static_cast<std::uint32_t>(c));
  }
  damage_dataset(file, "optimizer/large", 8 * 4000 + 5);
  MPI_Barrier(MPI_COMM_WORLD);
  ckpt::CheckpointReader damaged({.comm = MPI_COMM_WORLD, .file = file});
  at::Tensor into = at::empty_like(large);
  const std::string message = error_of<accelerate::Hdf5Error>(
      [&] { damaged.read_pieces("optimizer/large", interleaved_pieces(into, 1000, 0, 1), world_rank()); });
  EXPECT_NE(message.find("'/optimizer/large' is corrupted"), std::string::npos) << message;
  cleanup(dir);
}

// An entry kind this version does not know (a newer writer, or damage) is an
// error naming the file, the dataset and the kind; it is never read as
// another layout.
TEST(CheckpointIo, UnknownEntryKindIsAnError) {
  const fs::path dir = shared_directory("unknown_kind");
  const fs::path file = dir / "state.h5";
  write_sample_file(MPI_COMM_WORLD, file, 5);
  if (world_rank() == 0) {
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t d = H5Dopen2(f, "rng/state", H5P_DEFAULT);
    ASSERT_GE(H5Adelete(d, "kind"), 0);
    const std::string kind = "sharded_v9";
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, kind.size());
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attribute = H5Acreate2(d, "kind", type, space, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Awrite(attribute, type, kind.data()), 0);
    H5Aclose(attribute);
    H5Sclose(space);
    H5Tclose(type);
    H5Dclose(d);
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string message =
      error_of<accelerate::Hdf5Error>([&] { ckpt::CheckpointReader reader({.comm = MPI_COMM_WORLD, .file = file}); });
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("/rng/state"), std::string::npos) << message;
  EXPECT_NE(message.find("unknown kind 'sharded_v9'"), std::string::npos) << message;
  cleanup(dir);
}

// A batch of several MiB, so that rank ranges and thread parts both cut
// tensors in the middle, loaded with each way of spreading the shares and
// with one and with three reading threads per rank; then the same with one
// damaged tensor, and with the file cut short.
TEST(CheckpointIo, EverySpreadAndThreadCountReadsTheSameBytes) {
  const fs::path dir = shared_directory("spread");
  const fs::path file = dir / "state.h5";
  std::map<std::string, at::Tensor> saved;
  for (int i = 0; i < 6; ++i) {
    saved["w" + std::to_string(i)] = sample(at::kFloat, {700001 + 3 * i}, 50 + i);
    saved["b" + std::to_string(i)] = sample(at::kDouble, {17 + i}, 70 + i);
  }
  {
    ckpt::CheckpointWriter writer({.comm = MPI_COMM_WORLD, .file = file}, {});
    for (const auto& [name, tensor] : saved) writer.write_replicated("model/" + name, tensor);
    writer.close();
  }
  const std::vector<ckpt::ShareSpread> spreads{ckpt::ShareSpread::PageCache, ckpt::ShareSpread::Broadcast,
                                               ckpt::ShareSpread::Auto};
  auto load = [&](ckpt::ShareSpread spread, int threads) {
    ckpt::CheckpointReader reader({.comm = MPI_COMM_WORLD, .file = file, .spread = spread, .read_threads = threads});
    std::map<std::string, at::Tensor> loaded;
    for (const auto& [name, tensor] : saved) loaded[name] = at::zeros_like(tensor);
    reader.load_into("model", loaded, /*strict=*/true);
    return loaded;
  };
  for (const auto spread : spreads) {
    for (const int threads : {1, 3}) {
      const auto loaded = load(spread, threads);
      for (const auto& [name, tensor] : saved) {
        EXPECT_TRUE(at::equal(loaded.at(name), tensor))
            << name << ", spread " << static_cast<int>(spread) << ", " << threads << " threads";
      }
    }
  }

  damage_dataset(file, "model/w3", 1234567);
  MPI_Barrier(MPI_COMM_WORLD);
  for (const auto spread : spreads) {
    for (const int threads : {1, 3}) {
      const std::string message = error_of<accelerate::Hdf5Error>([&] { (void)load(spread, threads); });
      EXPECT_NE(message.find("'/model/w3' is corrupted"), std::string::npos) << message;
    }
  }

  // Cut short after the readers opened it (HDF5 itself refuses to open a truncated file).
  std::vector<std::unique_ptr<ckpt::CheckpointReader>> readers;
  for (const auto spread : spreads) {
    readers.push_back(std::make_unique<ckpt::CheckpointReader>(
        ckpt::ReaderOptions{.comm = MPI_COMM_WORLD, .file = file, .spread = spread, .read_threads = 2}));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::resize_file(file, fs::file_size(file) - 1000000);
  MPI_Barrier(MPI_COMM_WORLD);
  for (const auto& reader : readers) {
    std::map<std::string, at::Tensor> loaded;
    for (const auto& [name, tensor] : saved) loaded[name] = at::zeros_like(tensor);
    const std::string message = error_of<accelerate::Hdf5Error>([&] { reader->load_into("model", loaded, true); });
    EXPECT_NE(message.find("cannot be read"), std::string::npos) << message;
  }
  readers.clear();
  cleanup(dir);
}

TEST(CheckpointIo, StrictAndNonStrictKeyReports) {
  const fs::path dir = shared_directory("keys");
  write_sample_file(MPI_COMM_WORLD, dir / "state.h5", 4);
  ckpt::CheckpointReader reader({.comm = MPI_COMM_WORLD, .file = dir / "state.h5"});
  std::map<std::string, at::Tensor> destination;
  for (const Case& c : cases()) destination[c.name] = at::zeros(c.shape, at::TensorOptions().dtype(c.type));
  destination.erase("double_1d");                            // unexpected in the file
  destination.erase("int8_1d");                              // unexpected in the file
  destination["extra.weight"] = at::zeros({2}, at::kFloat);  // missing from the file
  destination["half_2d"] = at::zeros({3, 6}, at::kHalf);     // mis-shaped
  destination["int64_1d"] = at::zeros({9}, at::kInt);        // wrong dtype

  const std::string message =
      error_of<accelerate::ConfigError>([&] { reader.load_into("model", destination, /*strict=*/true); });
  for (const char* key : {"extra.weight", "double_1d", "int8_1d", "half_2d", "int64_1d", "[3, 6]", "[6, 3]"}) {
    EXPECT_NE(message.find(key), std::string::npos) << key << " not in: " << message;
  }
  // Strict failure loads nothing.
  EXPECT_EQ(destination["float_2d"].abs().sum().item<float>(), 0.0f);

  const ckpt::KeyReport report = reader.load_into("model", destination, /*strict=*/false);
  EXPECT_EQ(report.missing, std::vector<std::string>{"extra.weight"});
  EXPECT_EQ(report.unexpected, (std::vector<std::string>{"double_1d", "int8_1d"}));
  ASSERT_EQ(report.mismatched.size(), 2U);
  EXPECT_EQ(report.mismatched[0].name, "half_2d");
  EXPECT_EQ(report.mismatched[1].name, "int64_1d");
  EXPECT_TRUE(at::equal(destination["float_2d"], sample(at::kFloat, {7, 5}, 4)));
  EXPECT_TRUE(at::equal(destination["large_bf16"], sample(at::kBFloat16, {3, 700001}, 4)));
  EXPECT_EQ(destination["half_2d"].abs().sum().item<float>(), 0.0f);
  cleanup(dir);
}

TEST(CheckpointIo, RanksDisagreeingOnEntriesGetOneErrorEach) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const fs::path dir = shared_directory("mismatch");
  ckpt::CheckpointWriter writer({.comm = MPI_COMM_WORLD, .file = dir / "state.h5"}, {});
  const at::Tensor tensor = at::zeros({world_rank() == 1 ? 3 : 2}, at::kFloat);
  const std::string message =
      error_of<accelerate::CollectiveMismatch>([&] { writer.write_replicated("model/w", tensor); });
  EXPECT_NE(message.find("rank 0: replicated 'model/w' float32 [2]"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1: replicated 'model/w' float32 [3]"), std::string::npos) << message;
  writer.close();
  cleanup(dir);
}

TEST(CheckpointIo, RejectsBadNamesAndDtypes) {
  const fs::path dir = shared_directory("badnames");
  ckpt::CheckpointWriter writer({.comm = MPI_COMM_WORLD, .file = dir / "state.h5"}, {});
  const at::Tensor tensor = at::zeros({2}, at::kFloat);
  for (const char* name : {"", "/abs", "a//b", "a/", "a/../b"}) {
    const std::string message = error_of([&] { writer.write_replicated(name, tensor); });
    EXPECT_NE(message.find("entry name"), std::string::npos) << name << ": " << message;
  }
  const std::string complex =
      error_of([&] { writer.write_replicated("z", at::zeros({2}, at::TensorOptions().dtype(at::kComplexFloat))); });
  EXPECT_NE(complex.find("cannot store"), std::string::npos) << complex;
  writer.close();
  const std::string missing = error_of<accelerate::Hdf5Error>(
      [&] { ckpt::CheckpointReader reader({.comm = MPI_COMM_WORLD, .file = dir / "absent.h5"}); });
  EXPECT_NE(missing.find("absent.h5"), std::string::npos) << missing;
  cleanup(dir);
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
