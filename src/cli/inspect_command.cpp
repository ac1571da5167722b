// `accelerate-hpc inspect <checkpoint>`: what a checkpoint holds (step,
// iteration, world size, entries, bytes) and whether every dataset's
// CRC-32C matches its data. Runs on any number of ranks (each reads a share
// of every dataset). Exit code 0: complete and intact; 1: otherwise.
#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <span>
#include <string_view>

#include "accelerate/checkpoint/checkpoint_directory.hpp"
#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/state.hpp"
#include "cli/arguments.hpp"
#include "cli/commands.hpp"

namespace accelerate::cli {

namespace ckpt = accelerate::checkpoint;
namespace fs = std::filesystem;

int run_inspect(std::span<const std::string_view> args) {
  InspectArguments parsed;
  const auto app = inspect_app(parsed);
  if (const std::optional<int> code = parse_or_report(*app, args)) return *code;
#if !ACCELERATE_HAVE_HDF5
  detail::throw_feature_not_built("HDF5", "accelerate-hpc inspect", "-DACCELERATE_WITH_HDF5=ON");
#else
  const State state;
  const bool main = state.is_main_process();
  fs::path file = parsed.checkpoint;
  bool complete = true;
  if (fs::is_directory(file)) {
    const auto manifest = ckpt::read_complete_manifest(file);
    complete = manifest.has_value();
    if (main) {
      std::cout << "checkpoint " << file.string() << ": "
                << (complete ? "complete (manifest valid)" : "INCOMPLETE (no valid manifest.json)") << "\n";
    }
    file /=
        manifest && !manifest->files.empty() ? fs::path(manifest->files.front().name) : fs::path(ckpt::STATE_FILE_NAME);
  }
  ckpt::CheckpointReader reader({.comm = state.world_comm(), .file = file, .verify_checksums = false});
  const auto& h = reader.header();
  if (main) {
    std::cout << "file " << file.string() << "\n"
              << "  format " << h.format << " v" << h.format_version << ", written by Accelerate-HPC "
              << h.library_version << " with LibTorch " << h.torch_version << " on " << h.created << "\n"
              << "  step " << h.step << ", iteration " << h.iteration << ", world size " << h.world_size << ", nodes "
              << h.num_nodes << ", mixed precision " << h.mixed_precision << "\n";
  }
  ckpt::CheckpointReader verifier({.comm = state.world_comm(), .file = file});
  std::uint64_t total = 0;
  int bad = 0;
  const auto entries = reader.entries();
  for (const ckpt::EntryInfo& entry : entries) {
    std::string status = "ok";
    std::uint64_t bytes = 0;
    try {
      if (entry.kind == ckpt::EntryKind::Replicated) {
        bytes = verifier.read_replicated(entry.spec.name).nbytes();
      } else {
        for (int row = 0; row < entry.rows; ++row) {
          bytes += entry.kind == ckpt::EntryKind::PerRank ? verifier.read_per_rank(entry.spec.name, row).nbytes()
                                                          : verifier.read_per_rank_bytes(entry.spec.name, row).size();
        }
      }
    } catch (const Hdf5Error&) {
      status = "CHECKSUM MISMATCH";
      ++bad;
    }
    total += bytes;
    if (main) {
      const char* kind = entry.kind == ckpt::EntryKind::Replicated ? "replicated"
                         : entry.kind == ckpt::EntryKind::PerRank  ? "per-rank"
                                                                   : "per-rank bytes";
      std::printf("  %-48s %-9s %-16s %-14s %s\n", entry.spec.name.c_str(), entry.spec.dtype.c_str(),
                  ckpt::shape_to_string(entry.spec.shape).c_str(), kind, status.c_str());
    }
  }
  if (main) {
    std::printf("  %zu entries, %.1f MiB of data, %d corrupted\n", entries.size(),
                static_cast<double>(total) / (1 << 20), bad);
  }
  return bad == 0 && complete ? 0 : 1;
#endif
}

}  // namespace accelerate::cli
