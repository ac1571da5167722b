// CRC-32C throughput on one core. Every kernel this CPU offers
// (detail/crc32c.hpp) is timed beside a plain read of the same bytes,
// which is the ceiling a checksum can reach, and beside ISA-L's own code
// paths where the build has ISA-L. Sizes: one in cache and one from memory.
// Rounds visit the peers in rotated order; medians are reported.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "detail/crc32c.hpp"

#if BENCH_CHECKSUM_ISAL
// ISA-L exports its per-CPU implementations beside the dispatching
// crc32_iscsi, without declaring them in its header. Weak, so that a build
// of ISA-L without one of them leaves it out of the table instead of failing.
extern "C" {
__attribute__((weak)) unsigned int crc32_iscsi_00(unsigned char* buffer, int len, unsigned int state);
__attribute__((weak)) unsigned int crc32_iscsi_01(unsigned char* buffer, int len, unsigned int state);
__attribute__((weak)) unsigned int crc32_iscsi_by16_10(unsigned char* buffer, int len, unsigned int state);
}
#endif

namespace {

namespace crc = accelerate::detail;
using Clock = std::chrono::steady_clock;

struct Peer {
  std::string name;
  bool uses_avx512 = false;
  std::function<std::uint32_t(const unsigned char*, std::size_t)> run;
};

// Four independent sums of 64-bit words: as fast as the core can load.
__attribute__((noinline)) std::uint32_t read_all(const unsigned char* p, std::size_t n) {
  std::uint64_t s[4] = {0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      std::uint64_t word;
      std::memcpy(&word, p + i + 8 * k, 8);
      s[k] += word;
    }
  }
  for (; i < n; ++i) s[0] += p[i];
  return static_cast<std::uint32_t>(s[0] ^ s[1] ^ s[2] ^ s[3]);
}

std::string cpuinfo_field(const std::string& key) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "";
}

// The flags that decide which kernels can run.
std::string relevant_flags() {
  std::istringstream all(cpuinfo_field("flags") + " " + cpuinfo_field("Features"));
  const std::vector<std::string> wanted{"sse4_2", "pclmulqdq", "avx2", "vpclmulqdq", "avx512f", "crc32", "pmull"};
  std::string kept;
  for (std::string flag; all >> flag;) {
    if (std::find(wanted.begin(), wanted.end(), flag) != wanted.end() && kept.find(flag) == std::string::npos)
      kept += (kept.empty() ? "" : " ") + flag;
  }
  return kept.empty() ? "none of the relevant ones" : kept;
}

std::vector<Peer> make_peers() {
  std::vector<Peer> peers;
  peers.push_back({"read (ceiling)", false, read_all});
  for (const auto kernel : crc::crc32c_kernels()) {
    if (kernel == crc::Crc32cKernel::Portable) continue;  // a byte at a time: about 0.5 GB/s
    peers.push_back({crc::to_string(kernel),
                     kernel == crc::Crc32cKernel::Avx512Fold || kernel == crc::Crc32cKernel::IsaL,
                     [kernel](const unsigned char* p, std::size_t n) { return crc::crc32c(kernel, p, n); }});
  }
#if BENCH_CHECKSUM_ISAL
  // ISA-L's paths take and return the running state, and an int length.
  const auto isal = [](unsigned int (*f)(unsigned char*, int, unsigned int)) {
    return [f](const unsigned char* p, std::size_t n) {
      return f(const_cast<unsigned char*>(p), static_cast<int>(n), 0xFFFFFFFFu) ^ 0xFFFFFFFFu;
    };
  };
  if (crc32_iscsi_00 != nullptr && __builtin_cpu_supports("sse4.2"))
    peers.push_back({"isa-l crc32_iscsi_00 (sse4.2)", false, isal(crc32_iscsi_00)});
  if (crc32_iscsi_01 != nullptr && __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul"))
    peers.push_back({"isa-l crc32_iscsi_01 (sse4.2+pclmul)", false, isal(crc32_iscsi_01)});
  if (crc32_iscsi_by16_10 != nullptr && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq"))
    peers.push_back({"isa-l crc32_iscsi_by16_10 (avx512)", true, isal(crc32_iscsi_by16_10)});
#endif
  return peers;
}

double seconds_of(const Peer& peer, const unsigned char* p, std::size_t n, int passes) {
  volatile std::uint32_t sink = 0;
  const auto start = Clock::now();
  for (int i = 0; i < passes; ++i) sink = sink ^ peer.run(p, n);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t m = values.size() / 2;
  return values.size() % 2 == 1 ? values[m] : 0.5 * (values[m - 1] + values[m]);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CRC-32C throughput of every kernel on one core"};
  std::vector<double> sizes_mib{1, 256};
  int rounds = 11;
  double seconds_per_sample = 0.05;
  std::string json_path;
  app.add_option("--size-mib", sizes_mib, "buffer sizes in MiB")->capture_default_str();
  app.add_option("--rounds", rounds, "interleaved rounds; medians are reported")->capture_default_str();
  app.add_option("--sample-seconds", seconds_per_sample, "least time of one sample")->capture_default_str();
  app.add_option("--json", json_path, "write the results here");
  CLI11_PARSE(app, argc, argv);

  const auto peers = make_peers();
  std::printf("CPU: %s\nflags: %s\ncrc32c() uses: %s\n", cpuinfo_field("model name").c_str(), relevant_flags().c_str(),
              crc::to_string(crc::crc32c_fastest_kernel()));
  std::printf("%10s  %-38s %9s %9s %9s %7s\n", "size", "peer", "GB/s", "min", "max", "×read");

  std::ostringstream json;
  json << "{\"cpu\": \"" << cpuinfo_field("model name") << "\", \"flags\": \"" << relevant_flags()
       << "\", \"rounds\": " << rounds << ", \"results\": [";
  bool first_json = true;
  double best_without_avx512 = 0;
  std::string best_without_avx512_name;
  for (const double mib : sizes_mib) {
    const auto bytes = static_cast<std::size_t>(mib * 1024 * 1024);
    std::vector<unsigned char> buffer(bytes);
    std::mt19937_64 engine(1);
    for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
      const std::uint64_t word = engine();
      std::memcpy(buffer.data() + i, &word, 8);
    }
    // Every kernel must give the checksum of the first; a wrong one is not timed.
    const std::uint32_t expected = crc::crc32c(buffer.data(), bytes);
    std::vector<int> passes(peers.size());
    for (std::size_t k = 0; k < peers.size(); ++k) {
      if (k > 0 && peers[k].run(buffer.data(), bytes) != expected) {
        std::fprintf(stderr, "bench_checksum: %s gives a wrong CRC-32C at %g MiB\n", peers[k].name.c_str(), mib);
        return 1;
      }
      const double once = std::max(1e-7, seconds_of(peers[k], buffer.data(), bytes, 1));
      passes[k] = std::max(1, static_cast<int>(std::ceil(seconds_per_sample / once)));
    }
    std::vector<std::vector<double>> rates(peers.size());
    for (int round = 0; round < rounds; ++round) {
      for (std::size_t j = 0; j < peers.size(); ++j) {
        const std::size_t k = (j + static_cast<std::size_t>(round)) % peers.size();
        const double seconds = seconds_of(peers[k], buffer.data(), bytes, passes[k]);
        rates[k].push_back(static_cast<double>(bytes) * passes[k] / seconds / 1e9);
      }
    }
    const double read_rate = median(rates[0]);
    for (std::size_t k = 0; k < peers.size(); ++k) {
      const double rate = median(rates[k]);
      const auto [low, high] = std::minmax_element(rates[k].begin(), rates[k].end());
      std::printf("%6g MiB  %-38s %9.1f %9.1f %9.1f %7.2f\n", mib, peers[k].name.c_str(), rate, *low, *high,
                  rate / read_rate);
      json << (first_json ? "" : ", ") << "{\"size_mib\": " << mib << ", \"peer\": \"" << peers[k].name
           << "\", \"gb_per_s\": " << rate << ", \"min\": " << *low << ", \"max\": " << *high
           << ", \"uses_avx512\": " << (peers[k].uses_avx512 ? "true" : "false") << "}";
      first_json = false;
      if (k > 0 && !peers[k].uses_avx512 && mib == sizes_mib.back() && rate > best_without_avx512) {
        best_without_avx512 = rate;
        best_without_avx512_name = peers[k].name;
      }
    }
  }
  json << "]}\n";
  if (!best_without_avx512_name.empty())
    std::printf("fastest without AVX-512 at %g MiB: %s, %.1f GB/s\n", sizes_mib.back(),
                best_without_avx512_name.c_str(), best_without_avx512);
  if (!json_path.empty()) std::ofstream(json_path) << json.str();
  return 0;
}
