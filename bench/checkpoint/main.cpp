// bench_checkpoint: one training state (model + Adam-like moments, many
// tensors) saved and loaded four ways, in one run, at the rank count of the
// launcher:
//   ours      CheckpointWriter into a staged, fsynced, committed directory;
//             CheckpointReader::load_into per group (model, exp_avg, exp_avg_sq)
//   torch     torch::save / torch::load of the same tensors by rank 0, + fsync
//   raw       rank 0 writes the same bytes sequentially with write() + fsync,
//             and reads them back with pread() into the existing tensors, with
//             as many threads as our reader uses
// The three sides run in an order that rotates from round to round.
//   raw, every rank
//             (load only) every rank reads that file whole with read() at
//             once: the least any load that leaves the whole state on every
//             rank of one host can cost
// On a virtual machine whose balloon driver reports free pages to the host
// (Linux's page_reporting), memory the benchmark frees between sides (files
// deleted, caches dropped) goes back to the host, and the next side to touch
// it pays for the host to back it again: 2-3x slower writes into the page
// cache, for whichever side comes next. run.sh turns reporting off for the
// run where it may; the benchmark prints which way it ran.
// Loads are measured warm (page cache) and, when running as root, cold
// (after `echo 3 > /proc/sys/vm/drop_caches`). Peak extra memory of our save
// is the rise of the peak RSS (VmHWM, reset through /proc/self/clear_refs)
// over the RSS before the save, on the rank where it is largest.
//
//   mpirun -n 2 bench_checkpoint --dir /scratch/x --size-mib 256 --repeat 3 --json out.json
#include <CLI/CLI.hpp>

#include <limits>
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <torch/serialize.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "accelerate/checkpoint/checkpoint_directory.hpp"
#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/checkpoint/checkpoint_writer.hpp"

namespace ckpt = accelerate::checkpoint;
namespace fs = std::filesystem;

namespace {

struct Options {
  fs::path dir = fs::temp_directory_path() / "accelerate_bench_checkpoint";
  std::int64_t size_mib = 256;
  int repeat = 3;
  std::string json;
  bool two_phase = false;
  bool no_verify = false;  // diagnostic: loads skip the CRC-32C check
};

int rank_ = 0;
int size_ = 1;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Parameters of 4 MiB and 4 KiB (weights and biases) until a third of the
// state; exp_avg and exp_avg_sq take the other two thirds. Saved group after
// group (the model, then each moment), as a training state is.
std::vector<std::pair<std::string, at::Tensor>> make_state(std::int64_t bytes) {
  std::vector<std::int64_t> weights;
  const std::int64_t per_family = bytes / 3;
  for (std::int64_t used = 0; used < per_family;) {
    const std::int64_t weight = std::min<std::int64_t>(1 << 20, (per_family - used) / 4);
    if (weight <= 0) break;
    weights.push_back(weight);
    used += weight * 4 + 4096;
  }
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (const char* family : {"model", "exp_avg", "exp_avg_sq"}) {
    for (std::size_t layer = 0; layer < weights.size(); ++layer) {
      const std::string prefix = std::string(family) + "/layer" + std::to_string(layer);
      state.emplace_back(prefix + ".weight", at::rand({weights[layer]}, at::kFloat));
      state.emplace_back(prefix + ".bias", at::rand({1024}, at::kFloat));
    }
  }
  return state;
}

std::uint64_t state_bytes(const std::vector<std::pair<std::string, at::Tensor>>& state) {
  std::uint64_t total = 0;
  for (const auto& [name, tensor] : state) total += tensor.nbytes();
  return total;
}

long status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::strlen(key)));
  }
  return 0;
}

// Linux's free page reporting: blocks of 2^order pages that stay free are
// handed back to the hypervisor. An order above the largest block (10) turns
// it off. Empty when the kernel has none.
std::string free_page_reporting() {
  std::ifstream in("/sys/module/page_reporting/parameters/page_reporting_order");
  int order = 0;
  if (!(in >> order)) return "";
  if (order < 0) return "inactive (no balloon device)";
  return order > 10 ? "off (page_reporting_order " + std::to_string(order) + ")"
                    : "ON (page_reporting_order " + std::to_string(order) +
                          "): freed memory returns to the host, and timings vary from round to round";
}

void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

bool drop_caches() {
  int ok = 1;
  if (rank_ == 0) {
    ::sync();
    std::ofstream out("/proc/sys/vm/drop_caches");
    out << "3";
    out.flush();
    ok = out.good() ? 1 : 0;
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return ok == 1;
}

void fsync_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  ::fsync(fd);
  ::close(fd);
}

// Reads `file`, which holds the tensors of `state` back to back, into them
// with `threads` threads, each taking a contiguous share of the bytes.
void read_in_parallel(const fs::path& file, const std::vector<std::pair<std::string, at::Tensor>>& state,
                      int threads) {
  struct Piece {
    char* data;
    std::size_t offset;
    std::size_t size;
  };
  std::vector<Piece> pieces;
  std::size_t total = 0;
  for (const auto& entry : state) {
    pieces.push_back({static_cast<char*>(entry.second.data_ptr()), total, entry.second.nbytes()});
    total += entry.second.nbytes();
  }
  const int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) return;
  const std::size_t share = (total + static_cast<std::size_t>(std::max(threads, 1)) - 1) / std::max(threads, 1);
  auto read_range = [&](std::size_t begin, std::size_t end) {
    for (const Piece& piece : pieces) {
      const std::size_t from = std::max(begin, piece.offset);
      const std::size_t to = std::min(end, piece.offset + piece.size);
      for (std::size_t at = from; at < to;) {
        const ssize_t n = ::pread(fd, piece.data + (at - piece.offset), to - at, static_cast<off_t>(at));
        if (n <= 0) break;
        at += static_cast<std::size_t>(n);
      }
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t begin = share; begin < total; begin += share) {
    workers.emplace_back(read_range, begin, std::min(total, begin + share));
  }
  read_range(0, std::min(total, share));
  for (auto& worker : workers) worker.join();
  ::close(fd);
}

double timed(const std::function<void()>& body) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = now();
  body();
  MPI_Barrier(MPI_COMM_WORLD);
  double elapsed = now() - start;
  MPI_Bcast(&elapsed, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return elapsed;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  Options options;
  std::string dir = options.dir.string();
  CLI::App app("Save and load of a training state: ours, torch::save/load and the disk's raw speed.",
               "bench_checkpoint");
  app.add_option("--dir", dir, "where the files go (a file system to measure)")->capture_default_str();
  app.add_option("--size-mib", options.size_mib, "state size")->capture_default_str()->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--repeat", options.repeat, "rounds (a multiple of 3 gives each side each place in the order)")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--json", options.json, "write the results as JSON");
  app.add_option("--two-phase", options.two_phase, "1: HDF5's collective two-phase I/O")->capture_default_str();
  app.add_flag("--no-verify", options.no_verify,
               "diagnostic: our loads skip the CRC-32C check (what the check costs; not a setting to ship)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    MPI_Finalize();
    return code == 0 ? 0 : 2;
  }
  options.dir = dir;
  if (rank_ == 0) {
    fs::remove_all(options.dir);
    fs::create_directories(options.dir);
  }
  auto state = make_state(options.size_mib << 20);
  const std::uint64_t bytes = state_bytes(state);
  // Loaded the way a training state is: one load_into per group, into the existing tensors.
  std::map<std::string, std::map<std::string, at::Tensor>> groups;
  for (const auto& [name, tensor] : state) {
    const auto slash = name.find('/');
    groups[name.substr(0, slash)][name.substr(slash + 1)] = tensor;
  }
  const double gb = static_cast<double>(bytes) / 1e9;

  std::vector<double> ours_save, torch_save, raw_write, ours_load, torch_load, raw_read;
  std::vector<double> ours_load_cold, torch_load_cold, raw_read_cold;
  std::vector<double> every_read, every_read_cold;
  long peak_extra_kib = 0;
  int read_threads = 1;
  bool cold = false;
  for (int round = 0; round < options.repeat; ++round) {
    const fs::path checkpoint = options.dir / ("checkpoint_" + std::to_string(round));
    const fs::path torch_file = options.dir / ("torch_" + std::to_string(round) + ".pt");
    const fs::path raw_file = options.dir / ("raw_" + std::to_string(round) + ".bin");

    // --- save: the three sides in an order that rotates by round, so that
    // none of them always runs last (after the others filled the page cache
    // with dirty pages the disk is still writing back). ---
    auto save_ours = [&] {
      const long rss_before = status_kib("VmRSS:");
      reset_peak_rss();
      ours_save.push_back(timed([&] {
        ckpt::StagedCheckpoint staged(checkpoint, {});
        {
          ckpt::CheckpointWriter writer({.file = staged.file_path(), .two_phase_io = options.two_phase}, {});
          for (const auto& [name, tensor] : state) writer.write_replicated(name, tensor);
          writer.close();
        }
        staged.commit(true, ckpt::Manifest{.world_size = size_});
      }));
      long extra = status_kib("VmHWM:") - rss_before;
      MPI_Allreduce(MPI_IN_PLACE, &extra, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
      peak_extra_kib = std::max(peak_extra_kib, extra);
    };
    auto save_torch = [&] {
      torch_save.push_back(timed([&] {
        if (rank_ != 0) return;
        std::vector<at::Tensor> tensors;
        for (const auto& entry : state) tensors.push_back(entry.second);
        torch::save(tensors, torch_file.string());
        fsync_file(torch_file);
      }));
    };
    auto save_raw = [&] {
      raw_write.push_back(timed([&] {
        if (rank_ != 0) return;
        const int fd = ::open(raw_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        for (const auto& entry : state) {
          const char* data = static_cast<const char*>(entry.second.data_ptr());
          std::size_t left = entry.second.nbytes();
          while (left > 0) {
            const ssize_t n = ::write(fd, data, left);
            if (n <= 0) break;
            data += n;
            left -= static_cast<std::size_t>(n);
          }
        }
        ::fsync(fd);
        ::close(fd);
      }));
    };
    const std::vector<std::function<void()>> saves{save_ours, save_torch, save_raw};
    for (std::size_t k = 0; k < saves.size(); ++k) saves[(k + static_cast<std::size_t>(round)) % saves.size()]();

    // --- load (warm, then cold), rotated the same way ---
    for (const bool drop : {false, true}) {
      if (drop && !(cold = drop_caches())) break;
      auto& ours = drop ? ours_load_cold : ours_load;
      auto& torch_times = drop ? torch_load_cold : torch_load;
      auto& raw = drop ? raw_read_cold : raw_read;
      auto& every = drop ? every_read_cold : every_read;
      auto load_ours = [&] {
        ours.push_back(timed([&] {
          ckpt::CheckpointReader reader({.file = checkpoint / "state.h5", .verify_checksums = !options.no_verify});
          read_threads = reader.read_threads();
          for (const auto& [group, tensors] : groups) reader.load_into(group, tensors, /*strict=*/true);
        }));
      };
      auto load_torch = [&] {
        torch_times.push_back(timed([&] {
          if (rank_ != 0) return;
          std::vector<at::Tensor> tensors;
          torch::load(tensors, torch_file.string());
        }));
      };
      // The raw read uses as many threads as our reader (the rank's cores),
      // each reading its share of the file with pread: like against like.
      auto read_raw_file = [&] { read_in_parallel(raw_file, state, read_threads); };
      auto load_raw = [&] {
        raw.push_back(timed([&] {
          if (rank_ == 0) read_raw_file();
        }));
      };
      const std::vector<std::function<void()>> loads{load_ours, load_torch, load_raw};
      for (std::size_t k = 0; k < loads.size(); ++k) {
        if (drop) drop_caches();
        loads[(k + static_cast<std::size_t>(round)) % loads.size()]();
      }
      if (drop) drop_caches();
      every.push_back(timed(read_raw_file));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank_ == 0) {
      fs::remove_all(checkpoint);
      fs::remove(torch_file);
      fs::remove(raw_file);
    }
  }

  if (rank_ == 0) {
    auto bw = [&](const std::vector<double>& t) { return t.empty() ? 0.0 : gb / median(t); };
    std::printf("checkpoint benchmark: %.0f MiB state (%zu tensors), %d rank(s), median of %d, %s I/O\n",
                static_cast<double>(bytes) / (1 << 20), state.size(), size_, options.repeat,
                options.two_phase ? "two-phase collective" : "collective, direct per-rank");
    std::printf("  %-28s %8s %8s %8s   %s\n", "", "ours", "torch", "raw", "ours/raw  ours/torch  [raw, every rank]");
    std::printf("  %-28s %8.2f %8.2f %8.2f   %6.2f   %6.2f   GB/s\n", "save (with fsync)", bw(ours_save),
                bw(torch_save), bw(raw_write), bw(ours_save) / bw(raw_write), bw(ours_save) / bw(torch_save));
    std::printf("  %-28s %8.2f %8.2f %8.2f   %6.2f   %6.2f   GB/s  [%.2f]\n", "load, warm", bw(ours_load),
                bw(torch_load), bw(raw_read), bw(ours_load) / bw(raw_read), bw(ours_load) / bw(torch_load),
                bw(every_read));
    if (cold) {
      std::printf("  %-28s %8.2f %8.2f %8.2f   %6.2f   %6.2f   GB/s  [%.2f]\n", "load, cold (caches dropped)",
                  bw(ours_load_cold), bw(torch_load_cold), bw(raw_read_cold), bw(ours_load_cold) / bw(raw_read_cold),
                  bw(ours_load_cold) / bw(torch_load_cold), bw(every_read_cold));
    } else {
      std::printf("  load, cold: not measured (dropping the page cache needs root); warm only\n");
    }
    std::printf("  reading threads per rank: %d (the cores the rank may run on)\n", read_threads);
    if (const std::string reporting = free_page_reporting(); !reporting.empty()) {
      std::printf("  free page reporting to the hypervisor: %s\n", reporting.c_str());
    }
    std::printf("  peak extra memory during save: %.1f MiB = %.1f%% of the state\n", peak_extra_kib / 1024.0,
                100.0 * peak_extra_kib * 1024.0 / static_cast<double>(bytes));
    if (!options.json.empty()) {
      std::ofstream out(options.json);
      out << "{\"bench\":\"checkpoint\",\"state_bytes\":" << bytes << ",\"ranks\":" << size_
          << ",\"save_gbps\":{\"ours\":" << bw(ours_save) << ",\"torch\":" << bw(torch_save)
          << ",\"raw\":" << bw(raw_write) << "},\"load_warm_gbps\":{\"ours\":" << bw(ours_load)
          << ",\"torch\":" << bw(torch_load) << ",\"raw\":" << bw(raw_read) << ",\"raw_every_rank\":" << bw(every_read)
          << "},\"load_cold_gbps\":{\"ours\":" << bw(ours_load_cold) << ",\"torch\":" << bw(torch_load_cold)
          << ",\"raw\":" << bw(raw_read_cold) << ",\"raw_every_rank\":" << bw(every_read_cold)
          << "},\"read_threads\":" << read_threads << ",\"peak_extra_bytes\":" << peak_extra_kib * 1024 << "}\n";
    }
    fs::remove_all(options.dir);
  }
  MPI_Finalize();
  return 0;
}
