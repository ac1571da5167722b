// accelerate-hpc: the command-line tool. Exit codes: 0 success, 1 failure,
// 2 usage error. Exceptions end the whole job (abort_all) so that a failing
// rank never leaves the others waiting in a collective.
#include <iostream>
#include <string_view>
#include <vector>

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/process_control.hpp"
#include "cli/arguments.hpp"
#include "cli/commands.hpp"

namespace {

int completion(std::span<const std::string_view> args) {
  if (args.size() == 1 && args[0] == "bash") {
    std::cout << accelerate::cli::bash_completion();
    return 0;
  }
  std::cerr << "usage: accelerate-hpc completion bash   (bash is the shell supported; source the output)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::cout << accelerate::cli::tool_app()->help();
    return args.empty() ? 2 : 0;
  }
  const std::span<const std::string_view> rest(args.data() + 1, args.size() - 1);
  try {
    if (args[0] == "env") return accelerate::cli::run_env(rest);
    if (args[0] == "config") return accelerate::cli::run_config(rest);
    if (args[0] == "completion") return completion(rest);
    if (args[0] == "inspect" || args[0] == "convert") {
#if ACCELERATE_HAVE_HDF5
      return args[0] == "inspect" ? accelerate::cli::run_inspect(rest) : accelerate::cli::run_convert(rest);
#else
      std::cerr << "accelerate-hpc " << args[0]
                << ": this build has no HDF5 (configure with -DACCELERATE_WITH_HDF5=ON, or "
                   "spack install accelerate-hpc+hdf5).\n";
      return 1;
#endif
    }
  } catch (const std::exception& error) {
    accelerate::abort_all(error.what());
  }
  std::cerr << "accelerate-hpc: unknown command '" << args[0] << "'\n\n" << accelerate::cli::tool_app()->help();
  return 2;
}
