// The shared-memory all-reduce of CPU tensors, at 1, 2 and 4 ranks: every
// dtype and op against MPI's own all-reduce of the same data, sizes around
// its chunk and slice boundaries, one result on every rank, non-contiguous
// tensors, the hierarchical path across virtual nodes, and a deadline that
// names the rank that never came; the same for buffers of the node segment
// (ProcessGroup::all_reduce_buffer), reduced where they lie, and no rank
// returning while another still reads its buffer. The reduce-scatter and
// all-gather through the same segment likewise, and interleaved with each
// other.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <array>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/state.hpp"
#include "comm/mpi/shared_memory_all_reduce.hpp"
#include "common/mapped_file.hpp"
#include "common/test_helpers.hpp"

// A namespace of this file's own: the test bundle compiles several test files as one
// translation unit (cmake/AccelerateAddTest.cmake).
namespace ACCELERATE_TEST_FILE_ID {

namespace {

using accelerate::ProcessGroup;
using accelerate::ReduceOp;

constexpr auto kChunkBytes = static_cast<int64_t>(accelerate::detail::SharedMemoryAllReduce::kChunkBytes);
constexpr auto kWholeMessageBytes = static_cast<int64_t>(accelerate::detail::SharedMemoryAllReduce::kWholeMessageBytes);

std::unique_ptr<ProcessGroup> shared_group(const accelerate::State& state) {
  return ProcessGroup::world(state, {.shared_memory_all_reduce = true});
}

std::unique_ptr<ProcessGroup> mpi_group(const accelerate::State& state) {
  return ProcessGroup::world(state, {.shared_memory_all_reduce = false});
}

// Values whose sums and products stay exact in every dtype (bfloat16 holds
// integers to 256), so that any order of reduction gives one answer:
// products of 1s and 2s, sums of 0..5, extremes of 0..9.
at::Tensor rank_values(int64_t numel, int rank, ReduceOp op, c10::ScalarType dtype) {
  auto index = torch::arange(numel, torch::kLong);
  at::Tensor values;
  if (op == ReduceOp::Product) {
    values = 1 + (index + rank) % 2;
  } else if (op == ReduceOp::Min || op == ReduceOp::Max) {
    values = (index * 7 + rank * 3) % 10;
  } else {
    values = (index * 5 + rank) % 6;
  }
  return dtype == torch::kBool ? (values % 2 == 1) : values.to(dtype);
}

bool same_on_every_rank(ProcessGroup& group, const at::Tensor& tensor) {
  auto bytes = tensor.contiguous().view({-1}).view(torch::kUInt8).to(torch::kInt);
  auto low = bytes.clone();
  auto high = bytes.clone();
  group.all_reduce(low, {.op = ReduceOp::Min});
  group.all_reduce(high, {.op = ReduceOp::Max});
  return torch::equal(low, bytes) && torch::equal(high, bytes);
}

// Whether the tensor's memory is a segment of the node's shared memory.
bool in_node_segment(const at::Tensor& tensor) {
  return accelerate::testing::mapped_file_of(tensor.data_ptr()).find("/accelerate-hpc-") != std::string::npos;
}

// A buffer of all_reduce_buffer() holding `values`.
at::Tensor buffer_with(ProcessGroup& group, const at::Tensor& values) {
  auto buffer = group.all_reduce_buffer(values.numel(), values.options());
  EXPECT_TRUE(torch::equal(buffer, torch::zeros_like(buffer))) << "a new buffer is zeroed";
  buffer.copy_(values);
  return buffer;
}

TEST(SharedMemoryAllReduce, ChosenWhereRanksShareANode) {
  const accelerate::State state;
  const auto shared = shared_group(state);
  const auto mpi = mpi_group(state);
  EXPECT_EQ(mpi->cpu_all_reduce_algorithm(), "mpi");
  if (state.num_processes() == 1) {
    EXPECT_EQ(shared->cpu_all_reduce_algorithm(), "mpi") << "one rank has no one to share with";
  } else {
    EXPECT_EQ(shared->cpu_all_reduce_algorithm(),
              "shared memory (" + std::to_string(state.num_processes()) + " ranks per node × 1 node)");
  }
  // The default is on (ACCELERATE_SHM_ALLREDUCE unset in the tests).
  EXPECT_EQ(ProcessGroup::world(state)->cpu_all_reduce_algorithm(), shared->cpu_all_reduce_algorithm());
}

TEST(SharedMemoryAllReduce, EveryDtypeAndOpMatchesMpi) {
  const accelerate::State state;
  const auto shared = shared_group(state);
  const auto mpi = mpi_group(state);
  const int rank = state.process_index();
  const std::vector<c10::ScalarType> dtypes = {torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16,
                                               torch::kInt8,    torch::kUInt8,   torch::kInt16,   torch::kInt32,
                                               torch::kInt64,   torch::kBool};
  for (const auto dtype : dtypes) {
    const int64_t per_chunk = kChunkBytes / static_cast<int64_t>(c10::elementSize(dtype));
    // One element; fewer elements than ranks; a slice boundary off the
    // cache line; just above the one-synchronisation size; one chunk
    // exactly; two chunks and a ragged third. Each in ordinary memory and in
    // a buffer of all_reduce_buffer (above 64 KiB, in the node segment and
    // reduced where it lies).
    for (const int64_t numel :
         {int64_t{1}, int64_t{3}, int64_t{1000}, per_chunk / 16 + 3, per_chunk, 2 * per_chunk + 17}) {
      for (const auto op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max}) {
        const bool floating = c10::isFloatingType(dtype);
        if (op == ReduceOp::Avg && !floating) continue;  // refused by both (mpi_backend_test)
        for (const bool in_buffer : {false, true}) {
          const auto values = rank_values(numel, rank, op, dtype);
          auto ours = in_buffer ? buffer_with(*shared, values) : values.clone();
          auto theirs = values.clone();
          shared->all_reduce(ours, {.op = op});
          mpi->all_reduce(theirs, {.op = op});
          if (op == ReduceOp::Avg) {
            // Sum then divide on both sides; the division rounds once.
            EXPECT_TRUE(torch::allclose(ours.to(torch::kDouble), theirs.to(torch::kDouble), 1e-2, 0))
                << dtype << " avg of " << numel << (in_buffer ? " in a buffer" : "");
          } else {
            EXPECT_TRUE(torch::equal(ours, theirs))
                << dtype << ' ' << static_cast<int>(op) << " of " << numel << (in_buffer ? " in a buffer" : "");
          }
          EXPECT_TRUE(same_on_every_rank(*mpi, ours)) << dtype << ' ' << static_cast<int>(op) << " of " << numel;
        }
      }
    }
  }
}

// The dtypes the block collectives (reduce-scatter, all-gather) are checked in.
constexpr std::array kBlockDtypes{torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16,
                                  torch::kInt8,    torch::kInt64,   torch::kBool};

// The world twice, through shared memory and through MPI, and this rank's place.
struct SharedAndMpi {
  const accelerate::State state;
  const std::unique_ptr<ProcessGroup> shared = shared_group(state);
  const std::unique_ptr<ProcessGroup> mpi = mpi_group(state);
  const int rank = state.process_index();
  const int n = state.num_processes();
};

TEST(SharedMemoryReduceScatter, EveryDtypeAndOpMatchesMpi) {
  const SharedAndMpi world;
  const auto& [state, shared, mpi, rank, n] = world;
  for (const auto dtype : kBlockDtypes) {
    const int64_t per_chunk = kChunkBytes / static_cast<int64_t>(c10::elementSize(dtype));
    // Blocks of one element, of a few, and of more than a chunk's share.
    for (const int64_t block : {int64_t{1}, int64_t{37}, per_chunk / n + 5}) {
      for (const auto op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max}) {
        if (op == ReduceOp::Avg && !c10::isFloatingType(dtype)) continue;
        const auto input = rank_values(block * n, rank, op, dtype);
        auto ours = torch::empty({block}, input.options());
        auto theirs = torch::empty({block}, input.options());
        shared->reduce_scatter_async(ours, input, {.op = op})->wait();
        mpi->reduce_scatter_async(theirs, input, {.op = op})->wait();
        if (op == ReduceOp::Avg) {
          EXPECT_TRUE(torch::allclose(ours.to(torch::kDouble), theirs.to(torch::kDouble), 1e-2, 0))
              << dtype << " avg, block " << block;
        } else {
          EXPECT_TRUE(torch::equal(ours, theirs)) << dtype << ' ' << static_cast<int>(op) << ", block " << block;
        }
      }
    }
  }
  // A non-contiguous output is filled in place.
  auto base = torch::zeros({8, 3});
  auto column = base.select(1, 1);
  shared->reduce_scatter_async(column, torch::ones({8 * n}), {})->wait();
  EXPECT_TRUE(torch::equal(base.select(1, 1), torch::full({8}, static_cast<double>(n))));
  EXPECT_TRUE(torch::equal(base.select(1, 0), torch::zeros({8})));
}

TEST(SharedMemoryAllGather, EveryDtypeMatchesMpiInterleavedWithTheOtherCollectives) {
  const SharedAndMpi world;
  const auto& [state, shared, mpi, rank, n] = world;
  for (const auto dtype : kBlockDtypes) {
    const int64_t per_chunk = kChunkBytes / static_cast<int64_t>(c10::elementSize(dtype));
    // Blocks of one element, of a few, and of more than a chunk (several rounds).
    for (const int64_t block : {int64_t{1}, int64_t{37}, 2 * per_chunk + 5}) {
      const auto input = rank_values(block, rank + 1, ReduceOp::Sum, dtype);
      auto ours = torch::empty({block * n}, input.options());
      auto theirs = torch::empty({block * n}, input.options());
      shared->all_gather_async(ours, input)->wait();
      mpi->all_gather_async(theirs, input)->wait();
      EXPECT_TRUE(torch::equal(ours, theirs)) << dtype << ", block " << block;
      // The segment's slots, used next by the other collectives, give their
      // results too (a round left out of step would garble them).
      auto scattered = torch::empty({block}, input.options());
      auto expected = torch::empty({block}, input.options());
      shared->reduce_scatter_async(scattered, ours, {.op = ReduceOp::Max})->wait();
      mpi->reduce_scatter_async(expected, theirs, {.op = ReduceOp::Max})->wait();
      EXPECT_TRUE(torch::equal(scattered, expected)) << dtype << ", block " << block;
      auto reduced = input.clone();
      auto reference = input.clone();
      shared->all_reduce(reduced, {.op = ReduceOp::Max});
      mpi->all_reduce(reference, {.op = ReduceOp::Max});
      EXPECT_TRUE(torch::equal(reduced, reference)) << dtype << ", block " << block;
    }
  }
  // A non-contiguous output is filled in place.
  auto base = torch::zeros({4 * n, 3});
  auto column = base.select(1, 2);
  shared->all_gather_async(column, torch::full({4}, static_cast<double>(rank)))->wait();
  EXPECT_TRUE(torch::equal(base.select(1, 2), torch::arange(n, torch::kFloat).repeat_interleave(4)));
  EXPECT_TRUE(torch::equal(base.select(1, 0), torch::zeros({4 * n})));
}

TEST(SharedMemoryAllReduce, RandomFloatsAgreeWithMpiAndAreOneResultEverywhere) {
  const accelerate::State state;
  const auto shared = shared_group(state);
  const auto mpi = mpi_group(state);
  torch::manual_seed(100 + state.process_index());
  const int64_t numel = 3 * kChunkBytes / 4 + 5;  // three chunks, the last ragged
  auto ours = torch::randn({numel});
  auto theirs = ours.clone();
  shared->all_reduce(ours);
  mpi->all_reduce(theirs);
  EXPECT_TRUE(torch::allclose(ours, theirs, 1e-5, 1e-5));
  // Each slice is reduced once, by its owner, in rank order: every rank ends
  // with the same bits, whatever MPI's order would have been.
  EXPECT_TRUE(same_on_every_rank(*mpi, ours));
}

TEST(SharedMemoryAllReduce, NonContiguousAndAsynchronousCallsReduceInPlace) {
  const accelerate::State state;
  const auto shared = shared_group(state);
  const int n = state.num_processes();
  auto base = torch::full({64, 40}, state.process_index() + 1.0);
  auto column = base.select(1, 3);  // stride 40
  ASSERT_FALSE(column.is_contiguous());
  shared->all_reduce(column);
  EXPECT_TRUE(torch::equal(base.select(1, 3), torch::full({64}, n * (n + 1) / 2.0)));
  EXPECT_TRUE(torch::equal(base.select(1, 2), torch::full({64}, state.process_index() + 1.0)))
      << "only the view is reduced";
  auto async = torch::full({kChunkBytes}, 2.0);
  auto work = shared->all_reduce_async(async, {.op = ReduceOp::Avg});
  work->wait();
  EXPECT_TRUE(torch::equal(async, torch::full({kChunkBytes}, 2.0)));
}

TEST(SharedMemoryAllReduce, HierarchicalAcrossVirtualNodes) {
  accelerate::StateOptions options;
  options.emulated_ranks_per_node = 2;
  const accelerate::State state(options);
  const int n = state.num_processes();
  const auto shared = shared_group(state);
  if (n == 4) {
    EXPECT_EQ(shared->cpu_all_reduce_algorithm(), "shared memory (2 ranks per node × 2 nodes)");
  } else if (n == 2) {
    EXPECT_EQ(shared->cpu_all_reduce_algorithm(), "shared memory (2 ranks per node × 1 node)");
  }
  const auto mpi = mpi_group(state);
  for (const auto op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Product}) {
    auto ours = rank_values(kChunkBytes / 2 + 33, state.process_index(), op, torch::kFloat32);
    auto theirs = ours.clone();
    shared->all_reduce(ours, {.op = op});
    mpi->all_reduce(theirs, {.op = op});
    EXPECT_TRUE(torch::equal(ours, theirs)) << static_cast<int>(op);
  }
}

TEST(SharedMemoryAllReduceBuffer, LiesInTheNodeSegmentWhereRanksShareIt) {
  const accelerate::State state;
  const auto shared = shared_group(state);
  const auto mpi = mpi_group(state);
  const auto options = torch::TensorOptions().dtype(torch::kFloat32);
  const auto buffer = shared->all_reduce_buffer(1 << 20, options);
  EXPECT_EQ(buffer.sizes(), (std::vector<int64_t>{1 << 20}));
  EXPECT_EQ(buffer.dtype(), torch::kFloat32);
  EXPECT_EQ(in_node_segment(buffer), state.num_processes() > 1)
      << accelerate::testing::mapped_file_of(buffer.data_ptr());
  // Plain memory where all_reduce does not go through shared memory, and
  // at 64 KiB or less.
  EXPECT_FALSE(in_node_segment(mpi->all_reduce_buffer(1 << 20, options)));
  EXPECT_FALSE(in_node_segment(shared->all_reduce_buffer(kWholeMessageBytes / 4, options)));
  EXPECT_EQ(in_node_segment(shared->all_reduce_buffer(kWholeMessageBytes / 4 + 1, options)), state.num_processes() > 1);
  EXPECT_THROW((void)shared->all_reduce_buffer(-1, options), accelerate::ConfigError);
  if (state.num_processes() > 1) {
    // Sizes that differ are refused on every rank, naming them.
    const std::string error =
        accelerate::testing::error_of([&] { (void)shared->all_reduce_buffer(1000 + state.process_index(), options); });
    EXPECT_NE(error.find("asked for buffers of 4000 to " + std::to_string(4 * (999 + state.num_processes()))),
              std::string::npos)
        << error;
  }
}

TEST(SharedMemoryAllReduceBuffer, AWholeBufferIsReducedWhereItLies) {
  const accelerate::State state;
  if (state.num_processes() < 2) GTEST_SKIP() << "one rank has no shared memory path";
  using accelerate::detail::SharedMemoryAllReduce;
  auto shared = SharedMemoryAllReduce::create(state.world_comm(), 0);
  ASSERT_NE(shared, nullptr);
  const SharedMemoryAllReduce::Waiting waiting{std::chrono::steady_clock::now() + std::chrono::seconds(60), nullptr};
  const auto run = [&](at::Tensor& tensor) {
    ASSERT_TRUE(shared->run(tensor, ReduceOp::Sum, MPI_FLOAT, MPI_SUM, waiting).completed);
  };
  const int64_t numel = kChunkBytes / 2;
  auto buffer = shared->make_buffer(numel, torch::TensorOptions().dtype(torch::kFloat32));
  ASSERT_TRUE(in_node_segment(buffer));
  buffer.fill_(1.0);
  run(buffer);
  EXPECT_EQ(shared->reduced_in_buffers(), 1U);
  EXPECT_TRUE(torch::equal(buffer, torch::full({numel}, static_cast<double>(state.num_processes()))));
  // A copy, a part, and a small buffer go through the slots.
  auto copy = buffer.clone();
  run(copy);
  auto part = buffer.narrow(0, 0, numel - 1);
  run(part);
  auto small = shared->make_buffer(100, torch::TensorOptions().dtype(torch::kFloat32));
  run(small);
  EXPECT_EQ(shared->reduced_in_buffers(), 1U);
}

TEST(SharedMemoryAllReduceBuffer, NoRankReturnsWhileOthersStillReadItsBuffer) {
  // Each rank overwrites its own slice, the one the others copy out of its
  // buffer, the moment run() returns, as the next backward would. A rank
  // that returned before the others had copied would garble their results.
  const accelerate::State state;
  const int n = state.num_processes();
  if (n < 2) GTEST_SKIP() << "one rank has no shared memory path";
  using accelerate::detail::SharedMemoryAllReduce;
  auto shared = SharedMemoryAllReduce::create(state.world_comm(), 0);
  ASSERT_NE(shared, nullptr);
  const int rank = state.process_index();
  const int64_t slice = int64_t{1} << 18;  // 1 MiB of floats per rank
  auto buffer = shared->make_buffer(slice * n, torch::TensorOptions().dtype(torch::kFloat32));
  int garbled = 0;
  for (int round = 1; round <= 40; ++round) {
    buffer.fill_(static_cast<double>(round));
    ASSERT_TRUE(shared
                    ->run(buffer, ReduceOp::Sum, MPI_FLOAT, MPI_SUM,
                          {std::chrono::steady_clock::now() + std::chrono::seconds(60), nullptr})
                    .completed);
    buffer.narrow(0, rank * slice, slice).fill_(-1.0);
    for (int r = 0; r < n; ++r) {
      if (r != rank && !torch::equal(buffer.narrow(0, r * slice, slice), torch::full({slice}, 1.0 * n * round))) {
        ++garbled;
      }
    }
  }
  EXPECT_EQ(garbled, 0) << "slices copied after their owner had written them again";
}

TEST(SharedMemoryAllReduceBuffer, RepeatedInterleavedAndPartialCallsStayInStep) {
  const SharedAndMpi world;
  const auto& [state, shared, mpi, rank, n] = world;
  torch::manual_seed(200 + rank);
  const int64_t numel = kChunkBytes + 5;
  const auto values = torch::randn({numel});
  auto buffer = buffer_with(*shared, values);
  auto expected = values.clone();
  for (int round = 0; round < 3; ++round) {
    // Written again after each call, as backward writes a gradient bucket.
    buffer.copy_(values * (round + 1));
    shared->all_reduce_async(buffer)->wait();
    auto reference = values * (round + 1);
    mpi->all_reduce(reference);
    EXPECT_TRUE(torch::allclose(buffer, reference, 1e-5, 1e-5)) << "round " << round;
    // Each slice reduced once, by its owner, in rank order: one result.
    EXPECT_TRUE(same_on_every_rank(*mpi, buffer)) << "round " << round;
    // The ordinary path on the same segment counters, in between.
    auto plain = torch::full({3 * kChunkBytes / 8}, rank + 1.0);
    shared->all_reduce(plain, {.op = ReduceOp::Max});
    EXPECT_TRUE(torch::equal(plain, torch::full({3 * kChunkBytes / 8}, static_cast<double>(n))));
  }
  // A part of a buffer takes the ordinary path on every rank.
  auto part = buffer.narrow(0, 1, numel - 1);
  part.fill_(2.0);
  shared->all_reduce(part);
  EXPECT_TRUE(torch::equal(part, torch::full({numel - 1}, 2.0 * n)));
}

TEST(SharedMemoryAllReduceBuffer, HierarchicalAcrossVirtualNodes) {
  accelerate::StateOptions options;
  options.emulated_ranks_per_node = 2;
  const accelerate::State state(options);
  const auto shared = shared_group(state);
  const auto mpi = mpi_group(state);
  for (const auto op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Product}) {
    const auto values = rank_values(kChunkBytes / 2 + 33, state.process_index(), op, torch::kFloat32);
    auto ours = buffer_with(*shared, values);
    auto theirs = values.clone();
    shared->all_reduce(ours, {.op = op});
    mpi->all_reduce(theirs, {.op = op});
    EXPECT_TRUE(torch::equal(ours, theirs)) << static_cast<int>(op);
  }
}

TEST(SharedMemoryAllReduce, NodesOfOneRankOrOfUnequalSizesKeepMpi) {
  for (const int per_node : {1, 3}) {
    accelerate::StateOptions options;
    options.emulated_ranks_per_node = per_node;
    const accelerate::State state(options);
    const auto shared = shared_group(state);
    if (state.num_processes() == 4 || per_node == 1) {
      EXPECT_EQ(shared->cpu_all_reduce_algorithm(), "mpi") << per_node << " ranks per node";
    }
    auto t = torch::full({1000}, 1.0);
    shared->all_reduce(t);
    EXPECT_TRUE(torch::equal(t, torch::full({1000}, static_cast<double>(state.num_processes()))));
  }
}

// `collective` on a group whose last rank never comes: every other rank
// times out at the deadline with `label` and the missing rank named, and
// then finds the group out of step, which only the shared-memory path leaves
// behind (MPI's would time out again).
// `prepare` runs first on every rank.
void expect_missing_rank_named(const std::string& label, const std::function<void(ProcessGroup&)>& collective,
                               const std::function<void(ProcessGroup&)>& prepare = nullptr) {
  const accelerate::State state;
  if (state.num_processes() < 2) GTEST_SKIP() << "needs a rank to go missing";
  auto group = ProcessGroup::world(state, {.timeout = std::chrono::milliseconds(1500),
                                           .abort_on_timeout = false,
                                           .shared_memory_all_reduce = true});
  if (prepare) prepare(*group);
  const int missing = state.num_processes() - 1;
  if (state.process_index() != missing) {
    const auto start = std::chrono::steady_clock::now();
    try {
      collective(*group);
      ADD_FAILURE() << label << " completed without rank " << missing;
    } catch (const accelerate::TimeoutError& error) {
      const std::string text = error.what();
      EXPECT_NE(text.find(label + " on group 'world'"), std::string::npos) << text;
      EXPECT_NE(text.find("Ranks that never arrived: " + std::to_string(missing) + " ("), std::string::npos) << text;
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1400));
    // The segment is out of step now: the next call says so at once.
    try {
      collective(*group);
      ADD_FAILURE() << "a second " << label << " ran on a group whose last one timed out";
    } catch (const accelerate::TimeoutError& error) {
      EXPECT_NE(std::string(error.what()).find("out of step"), std::string::npos) << error.what();
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(SharedMemoryAllReduce, MissingRankIsNamedAtTheDeadline) {
  auto t = torch::ones({kChunkBytes});
  expect_missing_rank_named("all_reduce(sum) Float[" + std::to_string(kChunkBytes) + "]",
                            [&](ProcessGroup& group) { group.all_reduce(t); });
}

TEST(SharedMemoryAllReduceBuffer, MissingRankIsNamedAtTheDeadline) {
  at::Tensor buffer;
  expect_missing_rank_named(
      "all_reduce(sum) Float[" + std::to_string(kChunkBytes) + "]",
      [&](ProcessGroup& group) {
        ASSERT_TRUE(in_node_segment(buffer));
        group.all_reduce(buffer);
      },
      [&](ProcessGroup& group) {
        buffer = group.all_reduce_buffer(kChunkBytes, torch::TensorOptions().dtype(torch::kFloat32));
      });
}

// Two nodes of two ranks; the second node enters `all_reduce` of the tensor
// `make` gives (one chunk: one request across nodes) after the first timed
// out in the step across nodes and dropped the group and the tensor. The first node's requests are still
// pending then, and complete when the late node posts its own (during the
// last barrier): the memory they write must still be mapped. Without that,
// the first node's ranks crash in the barrier.
void expect_late_node_writes_into_kept_memory(const std::function<at::Tensor(ProcessGroup&)>& make) {
  accelerate::StateOptions options;
  options.emulated_ranks_per_node = 2;
  const accelerate::State state(options);
  if (state.num_processes() != 4) GTEST_SKIP() << "needs two nodes of two ranks";
  const bool late = state.process_index() >= 2;
  {
    auto group = ProcessGroup::world(state, {.timeout = std::chrono::milliseconds(1500),
                                             .abort_on_timeout = false,
                                             .shared_memory_all_reduce = true});
    at::Tensor tensor = make(*group);
    // Past the first node's deadline and its search for the missing ranks.
    if (late) std::this_thread::sleep_for(std::chrono::seconds(5));
    try {
      group->all_reduce(tensor);
      // The late node completes with the first node's pending requests.
      EXPECT_TRUE(late) << "rank " << state.process_index() << " completed without the late node";
    } catch (const accelerate::TimeoutError& error) {
      EXPECT_FALSE(late) << error.what();
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(SharedMemoryAllReduce, ALateNodeWritesIntoMemoryStillMapped) {
  expect_late_node_writes_into_kept_memory([](ProcessGroup&) { return torch::ones({kChunkBytes / 4}); });
}

TEST(SharedMemoryAllReduceBuffer, ALateNodeWritesIntoMemoryStillMapped) {
  expect_late_node_writes_into_kept_memory([](ProcessGroup& group) {
    auto buffer = group.all_reduce_buffer(kChunkBytes / 4, torch::TensorOptions().dtype(torch::kFloat32));
    EXPECT_TRUE(in_node_segment(buffer));
    return buffer.fill_(1);
  });
}

TEST(SharedMemoryAllGather, MissingRankIsNamedAtTheDeadline) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const auto input = torch::ones({1000});
  auto output = torch::empty({1000 * size});
  expect_missing_rank_named("all_gather Float[1000]",
                            [&](ProcessGroup& group) { group.all_gather_async(output, input)->wait(); });
}

}  // namespace

}  // namespace ACCELERATE_TEST_FILE_ID
