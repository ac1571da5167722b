// `accelerate-hpc convert <checkpoint> --to safetensors [--output DIR]
// [--max-shard-size SIZE]`: exports the model entries of an HDF5 checkpoint
// (group pytorch_model/) as model.safetensors, or as shards plus
// model.safetensors.index.json, for Python's safetensors and transformers.
// Runs as a single process (MPI starts as a singleton) or under a launcher
// (all ranks read, the main process writes). Every dataset is verified
// against its CRC-32C on the way. Exit codes: 0 done, 1 failure, 2 usage.
#include <ATen/ATen.h>

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "accelerate/checkpoint/checkpoint_directory.hpp"
#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/checkpoint/constants.hpp"
#include "accelerate/checkpoint/safetensors.hpp"
#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/mpi_comm.hpp"
#include "accelerate/runtime/state.hpp"
#include "cli/arguments.hpp"
#include "cli/commands.hpp"
#include "detail/dtype_names.hpp"

namespace accelerate::cli {

namespace ckpt = accelerate::checkpoint;
namespace fs = std::filesystem;

int run_convert(std::span<const std::string_view> args) {
  ConvertArguments arguments;
  const auto app = convert_app(arguments);
  if (const std::optional<int> code = parse_or_report(*app, args, convert_usage())) return *code;
  default_convert_output(arguments);
  const ConvertArguments* const parsed = &arguments;
#if !ACCELERATE_HAVE_HDF5
  detail::throw_feature_not_built("HDF5", "accelerate-hpc convert", "-DACCELERATE_WITH_HDF5=ON");
#else
  const State state;
  const bool main = state.is_main_process();
  auto fail = [&](const std::string& message) {
    if (main) std::cerr << "accelerate-hpc convert: " << message << "\n";
    return 1;
  };
  fs::path file = parsed->checkpoint;
  std::error_code ignored;
  if (fs::is_directory(file, ignored)) {
    const auto manifest = ckpt::read_complete_manifest(file);
    if (!manifest && main) {
      std::cerr << "accelerate-hpc convert: warning: '" << file.string()
                << "' has no valid manifest.json (an interrupted save?); converting what is there, "
                   "every dataset is still checked against its checksum\n";
    }
    file /=
        manifest && !manifest->files.empty() ? fs::path(manifest->files.front().name) : fs::path(ckpt::STATE_FILE_NAME);
  }
  if (!fs::is_regular_file(file, ignored)) {
    return fail("'" + file.string() + "' does not exist. Pass a checkpoint directory (holding " +
                std::string(ckpt::STATE_FILE_NAME) + ") or a checkpoint's .h5 file.");
  }
  ckpt::CheckpointReader reader({.comm = state.world_comm(), .file = file});
  const std::string group(ckpt::MODEL_NAME);
  std::map<std::string, at::Tensor> model;
  std::size_t skipped = 0;
  for (const ckpt::EntryInfo& entry : reader.entries(group)) {
    if (entry.kind != ckpt::EntryKind::Replicated) {
      ++skipped;  // per-rank rows are not model weights
      continue;
    }
    const auto type = detail::dtype_from_name(entry.spec.dtype, detail::DtypeFormat::checkpoint);
    if (!type) {
      return fail("'" + file.string() + ":/" + entry.spec.name + "' has dtype '" + entry.spec.dtype +
                  "', which safetensors cannot store.");
    }
    model.emplace(entry.spec.name.substr(group.size() + 1),
                  at::empty(entry.spec.shape, at::TensorOptions().dtype(*type)));
  }
  if (model.empty()) {
    return fail("'" + file.string() + "' has no model entries (no datasets under /" + group +
                "/). Is it a training-state checkpoint saved with the model? List it with "
                "'accelerate-hpc inspect " +
                parsed->checkpoint.string() + "'.");
  }
  reader.load_into(group, model, /*strict=*/true);
  if (main) {
    const std::vector<std::pair<std::string, at::Tensor>> tensors(model.begin(), model.end());
    std::uint64_t bytes = 0;
    for (const auto& [name, tensor] : tensors) bytes += tensor.nbytes();
    const auto written = ckpt::save_model(tensors, parsed->output, {.max_shard_size = parsed->max_shard_size});
    std::cout << "converted " << tensors.size() << " tensors (" << bytes << " bytes) of " << file.string() << " to "
              << parsed->output.string() << ":";
    for (const fs::path& path : written) std::cout << " " << path.filename().string();
    std::cout << "\n";
    if (skipped > 0) std::cout << "  skipped " << skipped << " per-rank entries of /" << group << "/\n";
  }
  return 0;
#endif
}

}  // namespace accelerate::cli
