#include "system_info.hpp"

#include <ATen/Parallel.h>
#include <accelerate/runtime/build_info.hpp>
#include <accelerate/runtime/host.hpp>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

namespace bench {
namespace {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

int collect_library(dl_phdr_info* info, std::size_t /*size*/, void* data) {
  const std::string path = info->dlpi_name != nullptr ? info->dlpi_name : "";
  const std::string file = std::filesystem::path(path).filename().string();
  if (file.find("blas") != std::string::npos || file.find("lapack") != std::string::npos) {
    std::error_code error;
    const auto resolved = std::filesystem::canonical(path, error);
    static_cast<std::set<std::string>*>(data)->insert(error ? path : resolved.string());
  }
  return 0;
}

}  // namespace

std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string one, five, fifteen;
  file >> one >> five >> fifteen;
  return file ? one + " " + five + " " + fifteen : "unknown";
}

std::string loaded_blas() {
  std::set<std::string> libraries;
  dl_iterate_phdr(collect_library, &libraries);
  std::string text;
  for (const auto& library : libraries) text += (text.empty() ? "" : ", ") + library;
  return text.empty() ? "none loaded" : text;
}

SystemInfo collect_system_info(MPI_Comm comm) {
  SystemInfo info;
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);

  // Cores and ranks per host: oversubscription on any host counts.
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &info.ranks_on_host);
  MPI_Comm_free(&node);
  info.cores_online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  int over = info.ranks_on_host > info.cores_online ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &over, 1, MPI_INT, MPI_MAX, comm);
  info.oversubscribed = over != 0;

  // Each rank's CPU binding, gathered to rank 0.
  std::array<char, 64> mine{};
  const std::string cpus = accelerate::format_cpu_list(accelerate::allowed_cpus());
  cpus.copy(mine.data(), std::min(cpus.size(), mine.size() - 1));
  std::vector<char> all(rank == 0 ? mine.size() * static_cast<std::size_t>(size) : 0);
  MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(), static_cast<int>(mine.size()), MPI_CHAR,
             0, comm);
  std::string binding;
  for (int r = 0; rank == 0 && r < size; ++r) {
    binding += (r == 0 ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": cpu " +
               std::string(all.data() + static_cast<std::size_t>(r) * mine.size());
  }

  auto& e = info.entries;
  e.emplace_back("host", accelerate::hostname());
  e.emplace_back("cpu", cpu_model());
  e.emplace_back("cores online", std::to_string(info.cores_online));
  e.emplace_back("ranks", std::to_string(size) + " (" + std::to_string(info.ranks_on_host) + " on this host" +
                              (info.oversubscribed ? ", OVERSUBSCRIBED: more ranks than cores)" : ")"));
  e.emplace_back("binding", binding);
  e.emplace_back("load average at start", load_average());
  for (const auto& component : accelerate::build_components()) {
    if (component.name != "Accelerate-HPC" && component.name != "MPI" && component.name != "LibTorch") continue;
    e.emplace_back(component.name, component.version + (component.detail.empty() ? "" : " (" + component.detail + ")"));
  }
  e.emplace_back("LibTorch intra-op threads", std::to_string(at::get_num_threads()));
  e.emplace_back("BLAS", loaded_blas());
  e.emplace_back("compiler", std::string("g++ ") + __VERSION__);
#ifdef ACCELERATE_BENCH_BUILD_TYPE
  e.emplace_back("build type", ACCELERATE_BENCH_BUILD_TYPE);
#endif
  return info;
}

}  // namespace bench
