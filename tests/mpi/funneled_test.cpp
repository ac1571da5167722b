// MPI_THREAD_FUNNELED means funneled: with data-loader workers assembling
// batches, failing on their own threads, and a collective failing on the
// main thread, no MPI call is made from any other thread. The binary is
// linked with tests/common/funneled_guard.cpp, which sees every MPI call the
// library makes and the thread it comes from.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <accelerate/accelerate.hpp>
#include <accelerate/comm/process_group.hpp>
#include <accelerate/data/data_loader_dispatcher.hpp>
#include <accelerate/data/data_loader_shard.hpp>

#include <string>
#include <thread>
#include <vector>

#include "common/funneled_guard.hpp"
#include "common/test_helpers.hpp"

namespace {

using accelerate::State;
using accelerate::testing::clear_off_main_thread_mpi_calls;
using accelerate::testing::error_of;
using accelerate::testing::off_main_thread_mpi_calls;
using Batch = torch::data::Example<>;

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += name + " ";
  return text;
}

/// Sample i: data [i, 2i], target i; odd samples from `grow_at` on are one
/// element longer, so that collating a batch of them fails (on a worker thread).
class GrowingDataset : public torch::data::datasets::Dataset<GrowingDataset> {
 public:
  GrowingDataset(std::size_t n, std::int64_t grow_at) : n_(n), grow_at_(grow_at) {}
  Batch get(std::size_t index) override {
    const auto i = static_cast<std::int64_t>(index);
    const auto f = static_cast<float>(i);
    return {i >= grow_at_ && i % 2 == 1 ? torch::tensor({f, 2 * f, 0.0F}) : torch::tensor({f, 2 * f}), torch::tensor(i)};
  }
  [[nodiscard]] torch::optional<std::size_t> size() const override { return n_; }

 private:
  std::size_t n_;
  std::int64_t grow_at_;
};

// The guard is bound: it counts the library's calls, and a call from
// another thread is noted (so that an empty list below means something).
TEST(Funneled, TheGuardSeesCallsAndTheirThreads) {
  const State state;
  const long before = accelerate::testing::guarded_mpi_calls();
  state.wait_for_everyone();
  EXPECT_GT(accelerate::testing::guarded_mpi_calls(), before);
  clear_off_main_thread_mpi_calls();
  std::thread([] {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  }).join();
  EXPECT_EQ(off_main_thread_mpi_calls(), std::vector<std::string>{"MPI_Comm_rank"});
  clear_off_main_thread_mpi_calls();
}

// Workers assemble batches and fail to collate one: the error names the rank
// (cached at start-up), and no worker made an MPI call.
TEST(Funneled, LoaderWorkersAndTheirErrorsMakeNoMpiCall) {
  const State state;
  clear_off_main_thread_mpi_calls();
  for (int round = 0; round < 3; ++round) {
    accelerate::DataLoaderShard loader(GrowingDataset(64, 1000), state,
                                       {.batch_size = 2, .shuffle = true, .num_workers = 2, .prefetch_factor = 2});
    loader.set_epoch(round);
    std::int64_t batches = 0;
    for (const Batch& batch : loader) batches += batch.data.size(0) > 0 ? 1 : 0;
    EXPECT_GT(batches, 0);
    accelerate::DataLoaderShard failing(GrowingDataset(64, 0), state,
                                        {.batch_size = 4, .num_workers = 2, .prefetch_factor = 2});
    const std::string error = error_of([&] {
      for (const Batch& batch : failing) (void)batch;
    });
    EXPECT_NE(error.find("[rank " + std::to_string(state.process_index()) + "/"), std::string::npos) << error;
  }
  EXPECT_TRUE(off_main_thread_mpi_calls().empty()) << joined(off_main_thread_mpi_calls());
}

// The dispatcher's workers (the main process reads ahead) while the main
// thread scatters, then a collective that fails its debug-mode check.
TEST(Funneled, DispatcherWorkersAndAFailingCollectiveMakeNoOffThreadCall) {
  const State state;
  clear_off_main_thread_mpi_calls();
  accelerate::DataLoaderDispatcher loader(GrowingDataset(64, 1000), state, {.batch_size = 2, .num_workers = 2});
  auto group = accelerate::ProcessGroup::world(state, {.abort_on_timeout = false, .debug_mode = true});
  for (const Batch& batch : loader) {
    at::Tensor values = batch.data.sum().reshape({1});
    group->all_reduce(values);
  }
  if (state.num_processes() > 1) {
    // Ranks disagree on the shape: every rank gets the debug-mode error.
    at::Tensor mismatched = at::ones({state.process_index() + 1});
    EXPECT_NE(error_of<std::exception>([&] { group->all_reduce(mismatched); }), "<no exception>");
  }
  EXPECT_TRUE(off_main_thread_mpi_calls().empty()) << joined(off_main_thread_mpi_calls());
}

}  // namespace
