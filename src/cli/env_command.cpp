#include <iomanip>
#include <iostream>
#include <sstream>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/build_info.hpp"
#include "accelerate/runtime/numa_affinity.hpp"
#include "accelerate/runtime/state.hpp"
#include "cli/arguments.hpp"
#include "cli/commands.hpp"

namespace accelerate::cli {

int run_env(std::span<const std::string_view> args) {
  if (const std::optional<int> code = parse_or_report(*env_app(), args)) return *code;
  const State state;
  // One line per rank, gathered like any object (sizes, then the bytes).
  std::string line = state.describe();
  try {
    line += "\n    binding: " + describe_current_binding();
  } catch (const Error& error) {
    line += "\n    binding: unavailable (" + std::string(error.what()) + ")";
  }
  const std::vector<c10::IValue> ranks = ProcessGroup::world(state)->gather_object(c10::IValue(line), 0);
  if (!state.is_main_process()) return 0;

  std::ostringstream out;
  out << "Accelerate-HPC environment\n\n";
  for (const ComponentInfo& c : build_components()) {
    out << "- " << std::left << std::setw(16) << (c.name + ":") << (c.enabled ? c.version : std::string("off"));
    if (!c.detail.empty()) out << " (" << c.detail << ")";
    out << '\n';
  }
  out << "- " << std::setw(16) << "Launcher:" << to_string(state.launcher().kind);
  if (state.launcher().job_id) out << " (job " << *state.launcher().job_id << ")";
  out << '\n';
  out << "- " << std::setw(16) << "MPI threads:" << to_string(state.thread_level_provided()) << '\n';
  out << "- " << std::setw(16) << "Layout:" << state.num_processes() << " process(es) on " << state.num_nodes()
      << " node(s), " << to_string(state.distributed_type()) << "\n\nProcesses:\n";
  for (const c10::IValue& line : ranks) out << "  " << line.toStringRef() << '\n';
  std::cout << out.str() << std::flush;
  return 0;
}

}  // namespace accelerate::cli
