// Checkpoint pieces that need no second rank: CRC-32C and its combination
// rule, JSON, ProjectConfiguration naming, manifests, listing and rotation
// of real directories, key reports, the share rule and flat-range selection.
#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <sched.h>
#include <thread>
#include <unistd.h>

#include "accelerate/checkpoint/checkpoint_directory.hpp"
#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/checkpoint/key_report.hpp"
#include "accelerate/config.hpp"
#include "accelerate/training_state/project_configuration.hpp"
#include "checkpoint/spare_core.hpp"
#include "common/test_helpers.hpp"
#include "detail/crc32c.hpp"
#include "detail/json.hpp"

#if ACCELERATE_HAVE_HDF5
#include "checkpoint/hdf5_binding.hpp"
#include "checkpoint/layout.hpp"
#endif

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace ckpt = accelerate::checkpoint;
namespace fs = std::filesystem;
using accelerate::testing::error_of;

namespace {

TEST(Crc32c, KnownValues) {
  EXPECT_EQ(accelerate::detail::crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  EXPECT_EQ(accelerate::detail::crc32c("", 0), 0u);
  const std::vector<unsigned char> zeros(32, 0);
  EXPECT_EQ(accelerate::detail::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
}

TEST(Crc32c, CombinationEqualsChecksumOfConcatenation) {
  std::mt19937 engine(7);
  std::vector<unsigned char> data(200000);
  for (auto& byte : data) byte = static_cast<unsigned char>(engine());
  const std::uint32_t whole = accelerate::detail::crc32c(data.data(), data.size());
  // Incremental continuation and the combine rule agree with one pass, for
  // splits around the 3×8 KiB stripes of the hardware path.
  for (const std::size_t split : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{24575},
                                  std::size_t{24576}, std::size_t{100001}, data.size()}) {
    const std::uint32_t a = accelerate::detail::crc32c(data.data(), split);
    const std::uint32_t b = accelerate::detail::crc32c(data.data() + split, data.size() - split);
    EXPECT_EQ(accelerate::detail::crc32c_combine(a, b, data.size() - split), whole) << split;
    EXPECT_EQ(accelerate::detail::crc32c(data.data() + split, data.size() - split, a), whole) << split;
  }
  data[12345] ^= 1;
  EXPECT_NE(accelerate::detail::crc32c(data.data(), data.size()), whole);
}

TEST(Crc32c, EveryKernelOfThisCpuAgreesWithTheTable) {
  // Lengths around the folding kernel's 64- and 256-byte blocks and its
  // 1 KiB threshold, at unaligned starts, continuing from a non-zero CRC.
  std::mt19937 engine(11);
  std::vector<unsigned char> data((1 << 20) + 4096);
  for (auto& byte : data) byte = static_cast<unsigned char>(engine());
  // Around every kernel's thresholds and block sizes (16, 32, 64, 128 and 256 bytes).
  std::vector<std::size_t> lengths{0,    1,    7,    8,    63,   64,   255,  256,  511,  512,
                                   513,  527,  528,  639,  640,  655,  1023, 1024, 1025, 1040,
                                   1055, 1056, 1072, 1087, 1088, 1279, 1280, 1343, 4096};
  for (int i = 0; i < 40; ++i) lengths.push_back(std::uniform_int_distribution<std::size_t>(1, 1 << 20)(engine));
  const auto kernels = accelerate::detail::crc32c_kernels();
  ASSERT_EQ(kernels.front(), accelerate::detail::Crc32cKernel::Portable);
  for (const auto kernel : kernels) {
    for (const std::size_t length : lengths) {
      for (const std::size_t start : {std::size_t{0}, std::size_t{1}, std::size_t{13}}) {
        const unsigned char* p = data.data() + start;
        EXPECT_EQ(accelerate::detail::crc32c(kernel, p, length, 0xDEADBEEFu),
                  accelerate::detail::crc32c(accelerate::detail::Crc32cKernel::Portable, p, length, 0xDEADBEEFu))
            << accelerate::detail::to_string(kernel) << ", " << length << " bytes from " << start;
      }
    }
  }
  std::cout << "[ INFO ] kernels checked:";
  for (const auto kernel : kernels) std::cout << ' ' << accelerate::detail::to_string(kernel);
  std::cout << '\n';
#if ACCELERATE_HAVE_ISAL_FOR_TESTS
  EXPECT_NE(std::find(kernels.begin(), kernels.end(), accelerate::detail::Crc32cKernel::IsaL), kernels.end())
      << "built with ISA-L, but its kernel is not offered";
#endif
}

TEST(Crc32c, TheDefaultIsTheFastestMeasuredKernelAndNeverThePortableOneWhenThereIsAnother) {
  const auto kernels = accelerate::detail::crc32c_kernels();
  const auto fastest = accelerate::detail::crc32c_fastest_kernel();
  EXPECT_NE(std::find(kernels.begin(), kernels.end(), fastest), kernels.end());
  if (kernels.size() > 1) EXPECT_NE(fastest, accelerate::detail::Crc32cKernel::Portable);
  std::cout << "[ INFO ] crc32c uses " << accelerate::detail::to_string(fastest) << '\n';
  EXPECT_EQ(accelerate::detail::crc32c("123456789", 9), 0xE3069283u);
}

// The writer checksums beside its writes on a second core: a task of 1 MiB
// or more runs on the worker, and the caller cannot leave before it has run
// (the bytes it reads belong to the caller).
TEST(SpareCore, LargeWorkRunsOnTheWorkerAndIsWaitedForOnLeaving) {
  ckpt::detail::SpareCore core(2);
  ASSERT_TRUE(core.threaded());
  std::thread::id ran_on;
  bool done = false;
  {
    auto task = core.run(
        [&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          ran_on = std::this_thread::get_id();
          done = true;
        },
        std::size_t{1} << 20);
  }  // no wait(): the destructor waits
  EXPECT_TRUE(done);
  EXPECT_NE(ran_on, std::this_thread::get_id());
  // Tasks one after another each see the last one's result.
  std::vector<int> order;
  for (int k = 0; k < 5; ++k) {
    auto task = core.run([&order, k] { order.push_back(k); }, std::size_t{4} << 20);
    task.wait();
    task.wait();  // a second wait returns at once
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(SpareCore, RunsInTheCallersThreadWithOneCoreOrSmallWork) {
  ckpt::detail::SpareCore single(1);
  EXPECT_FALSE(single.threaded());
  std::thread::id ran_on;
  { auto task = single.run([&] { ran_on = std::this_thread::get_id(); }, std::size_t{64} << 20); }
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  ckpt::detail::SpareCore two(2);
  ran_on = {};
  { auto task = two.run([&] { ran_on = std::this_thread::get_id(); }, 4096); }
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(SpareCore, TheRanksOfAHostShareItsCores) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_EQ(ckpt::detail::cores_of_this_rank(1), std::min<long>(CPU_COUNT(&mask), online));
  EXPECT_EQ(ckpt::detail::cores_of_this_rank(static_cast<int>(online)), 1);
  EXPECT_EQ(ckpt::detail::cores_of_this_rank(static_cast<int>(online) * 4), 1);  // never none
}

TEST(Json, ParsesAndWritesManifestShapes) {
  using accelerate::detail::Json;
  const Json value =
      Json::parse(R"( {"a": [1, -2, 3.5e1, true, null, "x\"\u00e9"], "b": {"c": 9007199254740993}} )", "test");
  EXPECT_EQ(value.find("b")->find("c")->integer(), 9007199254740993LL);  // beyond double precision
  EXPECT_EQ(value.find("a")->array()[5].string(), "x\"\xc3\xa9");
  EXPECT_EQ(Json::parse(value.dump(), "again").dump(), value.dump());
  const std::string message = error_of([] { Json::parse("{\"a\": [1, 2}", "broken.json"); });
  EXPECT_NE(message.find("broken.json"), std::string::npos) << message;
  EXPECT_NE(error_of([] { Json::parse("{} x", "t"); }).find("expected end of input"), std::string::npos);
}

TEST(Json, KeepsDoublesAndRefusesWhatItCannotRepresent) {
  using accelerate::detail::Json;
  // Whole-number doubles keep a fraction, so they read back as doubles (-0.0 stays negative).
  EXPECT_EQ(Json::parse("[-0.0, 5.0, 1e2, 7]", "t").dump(), "[-0.0,5.0,100.0,7]");
  EXPECT_NE(error_of([] { Json::parse("[9223372036854775808]", "big.json"); }).find("outside the 64-bit range"),
            std::string::npos);
  EXPECT_EQ(Json::parse("-9223372036854775808", "t").integer(), INT64_MIN);
  EXPECT_NE(error_of([] {
              Json::parse("[123456789012345678901234567890]", "big.json");
            }).find("outside the 64-bit range"),
            std::string::npos);
  EXPECT_NE(error_of([] { Json::parse(R"("\ud800")", "s.json"); }).find("must be followed by U+DC00"),
            std::string::npos);
  EXPECT_NE(error_of([] { Json::parse(R"("\udc00")", "s.json"); }).find("must follow U+D800"), std::string::npos);
  EXPECT_NE(error_of([] { Json::parse("\"\xff\"", "u.json"); }).find("ill-formed UTF-8"), std::string::npos);
  EXPECT_EQ(Json::parse(R"("\ud83d\ude00")", "t").string(), "\xf0\x9f\x98\x80");
  EXPECT_NO_THROW(Json::parse(std::string(64, '[') + std::string(64, ']'), "t"));
  EXPECT_NE(error_of([] {
              Json::parse(std::string(65, '[') + std::string(65, ']'), "deep.json");
            }).find("nesting deeper than 64"),
            std::string::npos);
}

TEST(ProjectConfiguration, DefaultsAndNaming) {
  ckpt::ProjectConfiguration config;  // seeds: None, None, False, None, 0, False
  EXPECT_TRUE(config.project_dir.empty());
  EXPECT_TRUE(config.logging_dir.empty());
  EXPECT_FALSE(config.automatic_checkpoint_naming);
  EXPECT_FALSE(config.total_limit.has_value());
  EXPECT_EQ(config.iteration, 0);
  EXPECT_FALSE(config.save_on_each_node);
  config.set_directories("/data/run");
  EXPECT_EQ(config.project_dir, "/data/run");
  EXPECT_EQ(config.logging_dir, "/data/run");
  config.logging_dir = "/logs";
  config.set_directories("/data/run2");
  EXPECT_EQ(config.logging_dir, "/logs");
  EXPECT_EQ(ckpt::automatic_checkpoint_path(config, 12), fs::path("/data/run2/checkpoints/checkpoint_12"));
  EXPECT_EQ(ckpt::checkpoint_index("a/checkpoint_12"), 12);
  for (const char* bad : {"checkpoint_", "checkpoint_x", "checkpoint_1a", "checkpoint_-1", "checkpoint_01",
                          ".checkpoint_3.tmp-ab", "ckpt_3"}) {
    EXPECT_FALSE(ckpt::checkpoint_index(bad).has_value()) << bad;
  }
  ckpt::ProjectConfiguration naming{.automatic_checkpoint_naming = true};
  EXPECT_NE(error_of([&] { naming.validate(); }).find("project_dir"), std::string::npos);
  ckpt::ProjectConfiguration limit{.project_dir = "p", .total_limit = 0};
  EXPECT_NE(error_of([&] { limit.validate(); }).find("total_limit=0"), std::string::npos);
}

TEST(KeyReport, ListsEveryProblem) {
  const std::vector<ckpt::TensorSpec> expected{{"a", "float32", {2}}, {"b", "float32", {3}}, {"c", "int64", {1}}};
  const std::vector<ckpt::TensorSpec> found{{"a", "float32", {2}}, {"b", "float32", {4}}, {"d", "float32", {1}}};
  const ckpt::KeyReport report = ckpt::compare_keys(expected, found);
  EXPECT_EQ(report.missing, std::vector<std::string>{"c"});
  EXPECT_EQ(report.unexpected, std::vector<std::string>{"d"});
  ASSERT_EQ(report.mismatched.size(), 1U);
  EXPECT_NE(report.to_string().find("b: expected float32 [3], checkpoint has float32 [4]"), std::string::npos)
      << report.to_string();
  EXPECT_TRUE(ckpt::compare_keys(expected, expected).empty());
}

// A fake but well-formed checkpoint directory (manifest + one file).
void make_checkpoint(const fs::path& dir, bool with_manifest, bool truncated = false) {
  fs::create_directories(dir);
  { std::ofstream(dir / ckpt::STATE_FILE_NAME) << "0123456789"; }
  if (!with_manifest) return;
  std::ofstream(dir / ckpt::MANIFEST_NAME)
      << R"({"format":"accelerate-hpc-checkpoint","format_version":1,"complete":true,"step":1,"iteration":0,)"
      << R"("world_size":1,"num_nodes":1,"save_on_each_node":false,"created":"x","files":[{"name":"state.h5","bytes":)"
      << (truncated ? 11 : 10) << "}]}";
}

TEST(CheckpointDirectory, LatestAndRotationConsiderOnlyCompleteSchemeDirectories) {
  const fs::path root = fs::temp_directory_path() / ("accelerate_ckpt_unit_" + std::to_string(::getpid()));
  fs::remove_all(root);
  make_checkpoint(root / "checkpoint_0", true);
  make_checkpoint(root / "checkpoint_2", true);
  make_checkpoint(root / "checkpoint_10", true);        // numeric, not lexical, order
  make_checkpoint(root / "checkpoint_11", false);       // no manifest: incomplete
  make_checkpoint(root / "checkpoint_12", true, true);  // manifest size disagrees: incomplete
  make_checkpoint(root / ".checkpoint_13.tmp-abc", true);
  make_checkpoint(root / "other_99", true);
  EXPECT_EQ(ckpt::latest_checkpoint(root), root / "checkpoint_10");
  EXPECT_EQ(ckpt::list_checkpoints(root).size(), 3U);
  EXPECT_FALSE(ckpt::latest_checkpoint(root / "absent").has_value());

  const auto removed = ckpt::rotate_checkpoints(root, 2, root / "checkpoint_10");
  EXPECT_EQ(removed, std::vector<fs::path>{root / "checkpoint_0"});
  EXPECT_FALSE(fs::exists(root / "checkpoint_0"));
  for (const char* kept :
       {"checkpoint_2", "checkpoint_10", "checkpoint_11", "checkpoint_12", ".checkpoint_13.tmp-abc", "other_99"}) {
    EXPECT_TRUE(fs::exists(root / kept)) << kept;
  }
  // total_limit 1 keeps the newest even when asked to keep an older one.
  ckpt::rotate_checkpoints(root, 1, root / "checkpoint_2");
  EXPECT_TRUE(fs::exists(root / "checkpoint_10"));
  EXPECT_TRUE(fs::exists(root / "checkpoint_2"));
  EXPECT_EQ(ckpt::latest_checkpoint(root), root / "checkpoint_10");
  // No leftovers of the removal under names of the scheme.
  for (const auto& entry : fs::directory_iterator(root)) {
    EXPECT_EQ(entry.path().filename().string().find(".trash"), std::string::npos) << entry.path();
  }
  fs::remove_all(root);
}

#if ACCELERATE_HAVE_HDF5
TEST(CheckpointLayout, SharesCoverTheDataInOrder) {
  for (const std::int64_t elements : {0L, 1L, 1000L, 262144L, 262145L, 10000000L}) {
    for (const int size : {1, 2, 3, 4, 7}) {
      std::int64_t next = 0;
      for (int rank = 0; rank < size; ++rank) {
        const auto share = ckpt::detail::share_of(elements, 4, rank, size);
        EXPECT_EQ(share.begin, share.count > 0 ? next : share.begin);
        if (share.count > 0) EXPECT_EQ(share.begin % 262144, 0);  // 1 MiB boundaries for float32
        next = share.count > 0 ? share.begin + share.count : next;
      }
      EXPECT_EQ(next, elements) << elements << " over " << size;
    }
  }
}

TEST(CheckpointLayout, FlatRangeSelectionPicksExactlyThoseElements) {
  // Write the selected range of 0..59 into an in-memory file of zeros and
  // read everything back: exactly the range, in row-major order, is set.
  const std::vector<hsize_t> dims{3, 4, 5};
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_core(fapl, 1 << 16, 0);
  const hid_t file = H5Fcreate("layout_in_memory.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  const hid_t space = H5Screate_simple(3, dims.data(), nullptr);
  const hid_t dataset = H5Dcreate2(file, "d", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  for (const auto& [begin, count] :
       std::vector<std::pair<int, int>>{{0, 60}, {7, 1}, {3, 40}, {19, 22}, {20, 20}, {58, 2}, {4, 2}, {0, 0}}) {
    std::vector<int> all(60, -1);
    H5Dwrite(dataset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data());
    std::vector<int> values(static_cast<std::size_t>(std::max(count, 1)));
    std::iota(values.begin(), values.end(), begin);
    ckpt::detail::select_flat_range(space, dims, begin, count);
    const hsize_t memory_dims[1] = {static_cast<hsize_t>(std::max(count, 1))};
    const hid_t memory = H5Screate_simple(1, memory_dims, nullptr);
    if (count == 0) H5Sselect_none(memory);
    ASSERT_GE(H5Dwrite(dataset, H5T_NATIVE_INT, memory, space, H5P_DEFAULT, values.data()), 0);
    H5Sclose(memory);
    H5Dread(dataset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data());
    for (int i = 0; i < 60; ++i) {
      EXPECT_EQ(all[static_cast<std::size_t>(i)], i >= begin && i < begin + count ? i : -1)
          << "element " << i << " of range [" << begin << ", " << begin + count << ")";
    }
  }
  H5Dclose(dataset);
  H5Sclose(space);
  H5Fclose(file);
  H5Pclose(fapl);
}

TEST(Hdf5Binding, AllCallsLandInOneParallelLibrary) {
  ckpt::detail::require_single_parallel_hdf5();
  const std::string library = ckpt::detail::hdf5_library_path();
  EXPECT_NE(library.find("hdf5"), std::string::npos) << library;
  EXPECT_EQ(library.find("serial"), std::string::npos) << library;
}
#endif

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
