#include "training/gradient_bucket_plan.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace accelerate::detail {

std::vector<std::vector<std::size_t>> plan_gradient_buckets(const std::vector<GradientSlotInfo>& slots,
                                                            int64_t first_cap_bytes, int64_t cap_bytes) {
  struct Open {
    std::vector<std::size_t> parameters;
    int64_t bytes = 0;
    bool first = true;  // no bucket of this (dtype, device) was closed yet
  };
  using Key = std::tuple<int, int, int>;  // dtype, device type, device index
  std::map<Key, Open> open;
  std::vector<std::vector<std::size_t>> closed;

  for (std::size_t k = slots.size(); k-- > 0;) {
    const auto& slot = slots[k];
    const Key key{static_cast<int>(slot.dtype), static_cast<int>(slot.device.type()), slot.device.index()};
    Open& bucket = open[key];
    const int64_t bytes = slot.numel * static_cast<int64_t>(c10::elementSize(slot.dtype));
    const int64_t cap = bucket.first ? first_cap_bytes : cap_bytes;
    if (!bucket.parameters.empty() && bucket.bytes + bytes > cap) {
      closed.push_back(std::move(bucket.parameters));
      bucket.parameters.clear();
      bucket.bytes = 0;
      bucket.first = false;
    }
    bucket.parameters.push_back(k);
    bucket.bytes += bytes;
    // A parameter at or above the cap fills the bucket on its own.
    if (bucket.bytes >= (bucket.first ? first_cap_bytes : cap_bytes)) {
      closed.push_back(std::move(bucket.parameters));
      bucket.parameters.clear();
      bucket.bytes = 0;
      bucket.first = false;
    }
  }
  for (auto& [key, bucket] : open) {
    if (!bucket.parameters.empty()) closed.push_back(std::move(bucket.parameters));
  }
  // Launch order: the bucket whose first parameter comes latest in
  // registration order (earliest in backward) goes first.
  std::stable_sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) { return a.front() > b.front(); });
  return closed;
}

}  // namespace accelerate::detail
