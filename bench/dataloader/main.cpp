// bench_dataloader: per-epoch time of our sharded loaders against LibTorch's
// own DataLoader (torch::data::make_data_loader) over the same in-memory
// dataset, the same per-rank samples and the same number of workers,
// measured in the same run and reported as ratios.
//
//   mpirun -np 2 bench_dataloader [--samples N] [--batch B] [--workers W] [--epochs E] [--json FILE]
//
// Peers, per rank:
//   libtorch     make_data_loader(dataset.map(Stack<>), DistributedSequentialSampler)
//   shard        DataLoaderShard (every rank loads its own batches)
//   dispatcher   DataLoaderDispatcher (rank 0 loads, scatters each rank its slice)
//   shard+stack  DataLoaderShard collating with LibTorch's Stack<> (diagnostic:
//                our loader's own cost, without our collate's copy)
// The sequential order keeps the two libraries' index work identical; each
// epoch's time is the slowest rank's; the median of E epochs is reported
// (and the best). Loaders are built once, and their order rotates per epoch.
#include <CLI/CLI.hpp>

#include <limits>
#include <mpi.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "accelerate/data/data_loader_dispatcher.hpp"
#include "accelerate/data/data_loader_shard.hpp"
#include "accelerate/runtime/state.hpp"

namespace {

struct Options {
  std::int64_t samples = 1'000'000;
  std::int64_t batch = 64;
  int workers = 0;
  int epochs = 3;
  std::string json;
};

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app("Epoch time of our loaders against LibTorch's.", "bench_dataloader");
  app.add_option("--samples", o.samples, "dataset size")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--batch", o.batch, "batch per rank")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--workers", o.workers, "loader worker threads")
      ->capture_default_str()
      ->check(CLI::Range(0LL, std::numeric_limits<long long>::max()));
  app.add_option("--epochs", o.epochs, "timed epochs")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--json", o.json, "write the results as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::exit(app.exit(error) == 0 ? 0 : 2);
  }
  return o;
}

/// n samples of 16 floats and an int64 label, held in two tensors; get(i)
/// returns views, as an in-memory dataset would.
class MemoryDataset : public torch::data::datasets::Dataset<MemoryDataset> {
 public:
  explicit MemoryDataset(std::int64_t n)
      : data_(torch::rand({n, 16})), targets_(torch::randint(0, 10, {n}, torch::kLong)) {}
  torch::data::Example<> get(std::size_t i) override {
    const auto k = static_cast<std::int64_t>(i);
    return {data_[k], targets_[k]};
  }
  [[nodiscard]] torch::optional<std::size_t> size() const override { return static_cast<std::size_t>(data_.size(0)); }

 private:
  torch::Tensor data_;
  torch::Tensor targets_;
};

/// Seconds of the slowest rank for one call of `epoch`; `checksum` keeps the
/// loop from being optimised away and checks that both sides saw the same data.
double timed_epoch(const std::function<double()>& epoch, double& checksum) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  checksum = epoch();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return seconds;
}

double sum_targets(const torch::data::Example<>& batch) {
  return static_cast<double>(batch.target.sum().item<std::int64_t>());
}

/// LibTorch's own collate (torch::stack of the data and of the targets), as
/// a collate function of our loader.
struct LibTorchStack {
  torch::data::Example<> operator()(std::vector<torch::data::Example<>> samples) const {
    return torch::data::transforms::Stack<>().apply_batch(std::move(samples));
  }
};

constexpr int kPeers = 4;

}  // namespace

int main(int argc, char** argv) {
  const accelerate::State state;
  const Options o = parse(argc, argv);
  const int rank = state.process_index();
  const int size = state.num_processes();
  torch::manual_seed(1);  // the same dataset on every rank
  torch::set_num_threads(1);
  const MemoryDataset dataset(o.samples);

  // Each rank's share: whole batches of o.batch, round-robin, as both sides shard.
  const std::int64_t per_rank = o.samples / (o.batch * size) * o.batch;
  double sums[kPeers] = {0, 0, 0, 0};
  const char* names[kPeers] = {"libtorch make_data_loader", "DataLoaderShard", "DataLoaderDispatcher",
                               "DataLoaderShard, Stack<> collate (diagnostic)"};

  // Every loader is constructed once, outside the timed epochs: each
  // epoch is one pass of `for (batch : loader)`, as in a training loop.
  // DistributedSequentialSampler hands rank r a contiguous block; our
  // shard hands out batches round-robin. Same sample count, same work.
  auto loader = torch::data::make_data_loader(
      MemoryDataset(dataset).map(torch::data::transforms::Stack<>()),
      torch::data::samplers::DistributedSequentialSampler(static_cast<std::size_t>(per_rank * size),
                                                          static_cast<std::size_t>(size),
                                                          static_cast<std::size_t>(rank)),
      torch::data::DataLoaderOptions(static_cast<std::size_t>(o.batch)).workers(static_cast<std::size_t>(o.workers)));
  auto libtorch_epoch = [&]() {
    double s = 0;
    for (auto& batch : *loader) s += sum_targets(batch);
    return s;
  };
  accelerate::DataLoaderShard shard(MemoryDataset(dataset), state,
                                    {.batch_size = o.batch, .drop_last = true, .num_workers = o.workers});
  auto shard_epoch = [&]() {
    double s = 0;
    for (const auto& batch : shard) s += sum_targets(batch);
    return s;
  };
  accelerate::DataLoaderDispatcher dispatcher(MemoryDataset(dataset), state,
                                              {.batch_size = o.batch, .drop_last = true, .num_workers = o.workers},
                                              {.dispatch_batches = true});
  auto dispatcher_epoch = [&]() {
    double s = 0;
    for (const auto& batch : dispatcher) s += sum_targets(batch);
    return s;
  };
  accelerate::DataLoaderShard<MemoryDataset, LibTorchStack> stacking(
      MemoryDataset(dataset), state, {.batch_size = o.batch, .drop_last = true, .num_workers = o.workers});
  auto stacking_epoch = [&]() {
    double s = 0;
    for (const auto& batch : stacking) s += sum_targets(batch);
    return s;
  };
  const std::function<double()> epochs[kPeers] = {libtorch_epoch, shard_epoch, dispatcher_epoch, stacking_epoch};
  std::vector<std::vector<double>> times(kPeers);
  for (int e = 0; e < o.epochs; ++e) {
    // The order rotates from epoch to epoch, so that no loader always runs
    // on the caches and page state the one before it left.
    for (int k = 0; k < kPeers; ++k) {
      const int peer = (k + e) % kPeers;
      times[peer].push_back(timed_epoch(epochs[peer], sums[peer]));
    }
  }
  std::vector<double> best(kPeers);
  std::vector<double> median(kPeers);
  for (int peer = 0; peer < kPeers; ++peer) {
    auto sorted = times[peer];
    std::sort(sorted.begin(), sorted.end());
    best[peer] = sorted.front();
    const std::size_t n = sorted.size();
    median[peer] = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  }
  // Every peer read per_rank samples per rank; the global sums must agree
  // between the loaders of ours (same round-robin order).
  double global[kPeers];
  MPI_Allreduce(sums, global, kPeers, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const std::int64_t sent = dispatcher.samples_sent();
  if (rank == 0) {
    std::printf(
        "bench_dataloader: %lld samples of 16 floats + label, batch %lld per rank, %d worker(s), %d rank(s), "
        "medians of %d epochs (order rotated per epoch); LibTorch %s\n",
        static_cast<long long>(o.samples), static_cast<long long>(o.batch), o.workers, size, o.epochs, TORCH_VERSION);
    std::printf(
        "| loader | median epoch s | best epoch s | samples/s per rank | median ratio to libtorch |\n"
        "|---|---:|---:|---:|---:|\n");
    for (int peer = 0; peer < kPeers; ++peer) {
      std::printf("| %s | %.3f | %.3f | %.0f | %.3f |\n", names[peer], median[peer], best[peer],
                  static_cast<double>(per_rank) / median[peer], median[peer] / median[0]);
    }
    const double epoch_samples = static_cast<double>(per_rank * size);
    std::printf(
        "dispatcher: rank 0 sent %lld samples over MPI in %d epoch(s) = %.3f per dataset sample per epoch "
        "(at most (ranks-1)/ranks = %.3f: each sample once)\n",
        static_cast<long long>(sent), o.epochs, static_cast<double>(sent) / (epoch_samples * o.epochs),
        static_cast<double>(size - 1) / size);
    if (global[1] != global[2] || global[1] != global[3]) {
      std::printf("WARNING: the loaders of ours saw different data\n");
    }
    if (!o.json.empty()) {
      std::ofstream out(o.json);
      out << "{\"ranks\": " << size << ", \"samples\": " << o.samples << ", \"batch\": " << o.batch
          << ", \"workers\": " << o.workers << ", \"epochs\": " << o.epochs
          << ", \"median_seconds\": {\"libtorch\": " << median[0] << ", \"shard\": " << median[1]
          << ", \"dispatcher\": " << median[2] << ", \"shard_stack\": " << median[3]
          << "}, \"best_seconds\": {\"libtorch\": " << best[0] << ", \"shard\": " << best[1]
          << ", \"dispatcher\": " << best[2] << ", \"shard_stack\": " << best[3]
          << "}, \"ratio\": {\"shard\": " << median[1] / median[0] << ", \"dispatcher\": " << median[2] / median[0]
          << ", \"shard_stack\": " << median[3] / median[0] << "}, \"dispatcher_samples_sent\": " << sent << "}\n";
    }
  }
  return 0;
}
