// bench/collectives: all_reduce, broadcast and all_gather of float32 through
// Accelerate-HPC's ProcessGroup, raw MPI and LibTorch's c10d Gloo, timed in
// one run. Start it under a launcher (run.sh runs 2 and 4 ranks):
//
//   mpirun -np 2 bench_collectives --json out.json --markdown out.md
//
// Every candidate is first checked for a correct result, then timed (see
// harness.hpp for the method, collective.hpp for the bandwidth conventions).
// Rank 0 prints the tables and writes the files.
#include <CLI/CLI.hpp>

#include <limits>
#include <ATen/Parallel.h>
#include <accelerate/runtime/process_control.hpp>
#include <accelerate/runtime/state.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "accelerate/runtime/mpi_comm.hpp"
#include "collective.hpp"
#include "harness.hpp"
#include "peer.hpp"
#include "report.hpp"
#include "system_info.hpp"

namespace {

struct Options {
  std::string json;
  std::string markdown;
  std::vector<bench::Collective> ops{std::begin(bench::kAllCollectives), std::end(bench::kAllCollectives)};
  std::vector<int64_t> sizes = bench::default_sizes();
  bench::Plan plan;
  bool gloo = true;
  bool diagnostics = true;
  std::vector<std::string> only;  ///< time just these candidates (for profiling)
  int torch_threads = 1;
};

// Returns an error message ("help" for --help), empty on success; `usage`
// receives the generated help.
std::string parse(int argc, char** argv, Options& options, std::string& usage) {
  CLI::App app(
      "all_reduce, broadcast and all_gather through Accelerate-HPC, raw MPI and c10d Gloo (under "
      "mpirun/srun; rank 0 reports).",
      "bench_collectives");
  app.add_option("--json", options.json, "write every measurement as JSON");
  app.add_option("--markdown", options.markdown, "write the tables as Markdown (for docs/performance.md)");
  app.add_option_function<std::vector<std::string>>(
         "--ops",
         [&](const std::vector<std::string>& names) {
           options.ops.clear();
           for (const auto& name : names) options.ops.push_back(*bench::collective_from_string(name));
         },
         "all_reduce,broadcast,all_gather (default: all)")
      ->delimiter(',')
      ->check([](const std::string& name) {
        return bench::collective_from_string(name) ? std::string() : "unknown collective '" + name + "'";
      });
  app.add_option_function<std::vector<std::string>>(
         "--sizes",
         [&](const std::vector<std::string>& texts) {
           options.sizes.clear();
           for (const auto& text : texts) options.sizes.push_back(*bench::parse_bytes(text));
         },
         "bytes per rank, e.g. 4,4K,64K,1M,16M,64M (default)")
      ->delimiter(',')
      ->check([](const std::string& text) {
        const auto bytes = bench::parse_bytes(text);
        return bytes && *bytes >= 4 && *bytes % 4 == 0 ? std::string()
                                                       : "bad size '" + text + "' (a multiple of 4 bytes)";
      });
  app.add_option("--repetitions", options.plan.repetitions, "timed repetitions per candidate; medians are reported")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option("--slow-repetitions", options.plan.slow_repetitions, "repetitions when one call outlasts a batch")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  app.add_option_function<double>(
         "--batch-ms", [&](const double& ms) { options.plan.batch_seconds = ms / 1e3; },
         "target length of one timed batch in ms (default 5)")
      ->check([](const std::string& value) {
        try {
          return std::stod(value) > 0 ? std::string() : std::string("must be positive");
        } catch (const std::exception&) {
          return "'" + value + "' is not a number";
        }
      });
  app.add_flag_function(
      "--no-gloo", [&](std::int64_t) { options.gloo = false; }, "skip the c10d Gloo peer");
  app.add_flag_function(
      "--no-diagnostics", [&](std::int64_t) { options.diagnostics = false; },
      "time only accelerate, mpi and gloo (not the diagnostic candidates)");
  app.add_option("--only", options.only, "time just these candidates, e.g. accelerate,mpi (for profiling)")
      ->delimiter(',');
  app.add_option("--torch-threads", options.torch_threads, "LibTorch intra-op threads per rank (1: one rank per core)")
      ->capture_default_str()
      ->check(CLI::Range(1LL, std::numeric_limits<long long>::max()));
  usage = app.help();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return "help";
  } catch (const CLI::ParseError& error) {
    return error.what();
  }
  if (options.ops.empty() || options.sizes.empty()) return "nothing to measure";
  return {};
}

// Runs every candidate once on rank-dependent data and checks the result on
// every rank; a wrong result ends the run (its timings would mean nothing).
void validate(MPI_Comm comm, bench::Collective op, bench::Buffers& buffers, const bench::Candidate& candidate, int rank,
              int ranks) {
  bench::fill_for_validation(op, buffers, rank);
  (candidate.check_call ? candidate.check_call : candidate.call)();
  const std::string problem = bench::check_validation(op, buffers, ranks);
  int bad = problem.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, comm);
  if (bad != 0) {
    if (!problem.empty()) {
      std::fprintf(stderr, "[rank %d] %s %s via %s: wrong result: %s\n", rank, std::string(to_string(op)).c_str(),
                   bench::format_bytes(buffers.count * 4).c_str(), candidate.name.c_str(), problem.c_str());
    }
    MPI_Barrier(comm);
    accelerate::abort_all("bench_collectives: a candidate returned a wrong result; see above.");
  }
  bench::fill_for_timing(buffers);
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  return static_cast<bool>(file);
}

int run(int argc, char** argv) {
  Options options;
  std::string usage;
  const std::string problem = parse(argc, argv, options, usage);
  accelerate::State state;
  const int rank = state.process_index();
  const int ranks = state.num_processes();
  if (!problem.empty()) {
    if (rank == 0) {
      if (problem != "help") std::fprintf(stderr, "bench_collectives: %s\n", problem.c_str());
      std::fputs(usage.c_str(), problem == "help" ? stdout : stderr);
    }
    return problem == "help" ? 0 : 2;
  }
  at::set_num_threads(options.torch_threads);
  const auto started = std::chrono::steady_clock::now();
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(state.world_comm(), &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);

  bench::Run result;
  result.ranks = ranks;
  result.plan = options.plan;
  for (int i = 0; i < argc; ++i) result.command += (i ? " " : "") + std::string(argv[i]);
  result.system = bench::collect_system_info(comm);

  std::vector<std::unique_ptr<bench::Peer>> peers;
  peers.push_back(bench::make_accelerate_peer(state));
  peers.push_back(bench::make_mpi_peer(comm));
  peers.push_back(bench::make_memory_peer());
  if (options.gloo) {
    auto gloo = bench::make_gloo_peer(comm, result.gloo_missing);
    if (gloo) peers.push_back(std::move(gloo));
  } else {
    result.gloo_missing = "disabled with --no-gloo";
  }
  for (const auto& peer : peers) result.peers.emplace_back(peer->name(), peer->describe());

  for (const bench::Collective op : options.ops) {
    for (const int64_t bytes : options.sizes) {
      bench::Buffers buffers = bench::make_buffers(op, bytes, ranks);
      std::vector<bench::Candidate> timed;
      std::vector<bench::Candidate> diagnostic;
      for (const auto& peer : peers) {
        for (auto& candidate : peer->candidates(op, buffers)) {
          (candidate.diagnostic ? diagnostic : timed).push_back(std::move(candidate));
        }
      }
      if (options.diagnostics || !options.only.empty()) {
        timed.insert(timed.end(), diagnostic.begin(), diagnostic.end());
      }
      if (!options.only.empty()) {
        std::erase_if(timed, [&](const bench::Candidate& candidate) {
          return std::find(options.only.begin(), options.only.end(), candidate.name) == options.only.end();
        });
      }
      for (const auto& candidate : timed) {
        if (!candidate.reference) validate(comm, op, buffers, candidate, rank, ranks);
      }
      const auto samples = bench::measure(comm, timed, options.plan);
      std::string progress;
      for (std::size_t c = 0; c < timed.size(); ++c) {
        result.rows.push_back({op, bytes, timed[c].name, timed[c].what, timed[c].diagnostic, samples[c]});
        char text[96];
        std::snprintf(text, sizeof(text), " %s %.2f us", timed[c].name.c_str(), samples[c].median() * 1e6);
        progress += text;
      }
      if (rank == 0) {
        std::fprintf(stderr, "[%d ranks] %s %s:%s\n", ranks, std::string(to_string(op)).c_str(),
                     bench::format_bytes(bytes).c_str(), progress.c_str());
      }
    }
  }
  peers.clear();  // Gloo and the ProcessGroup go before MPI does
  MPI_Comm_free(&comm);
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  result.system.entries.emplace_back("load average at end", bench::load_average());

  if (rank != 0) return 0;
  const auto targets = bench::evaluate_targets(result);
  bench::print_text(std::cout, result, targets);
  std::cout.flush();
  int status = 0;
  if (!options.json.empty()) {
    std::ostringstream json;
    bench::write_json(json, result, targets);
    if (!write_file(options.json, json.str())) {
      std::fprintf(stderr, "bench_collectives: cannot write %s\n", options.json.c_str());
      status = 1;
    }
  }
  if (!options.markdown.empty()) {
    std::ostringstream markdown;
    bench::write_markdown(markdown, result, targets);
    if (!write_file(options.markdown, markdown.str())) {
      std::fprintf(stderr, "bench_collectives: cannot write %s\n", options.markdown.c_str());
      status = 1;
    }
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    accelerate::abort_all(std::string("bench_collectives: ") + error.what());
  }
}
