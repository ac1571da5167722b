#include "checkpoint/timestamp.hpp"

#include <chrono>
#include <ctime>

namespace accelerate::checkpoint::detail {

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

}  // namespace accelerate::checkpoint::detail
