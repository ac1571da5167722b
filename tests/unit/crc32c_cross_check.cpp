// Every CRC-32C kernel this CPU offers against the byte-wise table, without
// LibTorch or GoogleTest, so that it builds for another architecture and runs
// under an emulator (crc32c_aarch64.sh). Exit status: 0 when every kernel
// agrees and every kernel named by --expect is offered, 1 otherwise.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "detail/crc32c.hpp"

namespace crc = accelerate::detail;

int main(int argc, char** argv) {
  std::vector<std::string> expected;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--expect") == 0) expected.emplace_back(argv[i + 1]);
  }
  std::mt19937 engine(7);
  std::vector<unsigned char> data((1 << 18) + 64);
  for (auto& byte : data) byte = static_cast<unsigned char>(engine());
  std::vector<std::size_t> lengths{0, 1, 7, 8, 15, 16, 17, 127, 128, 511, 512, 513, 527, 528, 639, 640, 655, 4096};
  for (int i = 0; i < 24; ++i) lengths.push_back(std::uniform_int_distribution<std::size_t>(1, 1 << 18)(engine));
  lengths.push_back(3 * 8192 + 5);  // past one round of the interleaved streams

  int failures = 0;
  const auto kernels = crc::crc32c_kernels();
  std::printf("kernels checked:");
  for (const auto kernel : kernels) std::printf(" %s", crc::to_string(kernel));
  std::printf("\n");
  for (const auto kernel : kernels) {
    for (const std::size_t length : lengths) {
      for (const std::size_t start : {std::size_t{0}, std::size_t{1}, std::size_t{13}}) {
        const unsigned char* p = data.data() + start;
        const auto got = crc::crc32c(kernel, p, length, 0xDEADBEEFu);
        const auto want = crc::crc32c(crc::Crc32cKernel::Portable, p, length, 0xDEADBEEFu);
        if (got != want) {
          if (++failures <= 10)
            std::printf("MISMATCH %s: %zu bytes from %zu: %08x, the table gives %08x\n", crc::to_string(kernel), length,
                        start, got, want);
        }
      }
    }
  }
  for (const auto& name : expected) {
    bool offered = false;
    for (const auto kernel : kernels) offered = offered || name == crc::to_string(kernel);
    if (!offered) {
      std::printf("MISSING: the kernel %s is not offered on this CPU\n", name.c_str());
      ++failures;
    }
  }
  if (crc::crc32c("123456789", 9) != 0xE3069283u) {
    std::printf("MISMATCH: the check value of \"123456789\" is wrong\n");
    ++failures;
  }
  std::printf("%s\n", failures == 0 ? "all kernels agree" : "FAILED");
  return failures == 0 ? 0 : 1;
}
