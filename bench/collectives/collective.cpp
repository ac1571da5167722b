#include "collective.hpp"

#include <ATen/ops/empty.h>

#include <cctype>
#include <cstdio>

namespace bench {

std::string_view to_string(Collective op) {
  switch (op) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::Broadcast: return "broadcast";
    case Collective::AllGather: return "all_gather";
  }
  return "?";
}

std::optional<Collective> collective_from_string(std::string_view name) {
  for (Collective op : kAllCollectives) {
    if (to_string(op) == name) return op;
  }
  return std::nullopt;
}

std::vector<int64_t> default_sizes() {
  constexpr int64_t KiB = 1024;
  constexpr int64_t MiB = 1024 * KiB;
  return {4, 4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB};
}

std::string format_bytes(int64_t bytes) {
  constexpr int64_t KiB = 1024;
  constexpr int64_t MiB = 1024 * KiB;
  if (bytes >= MiB && bytes % MiB == 0) return std::to_string(bytes / MiB) + " MiB";
  if (bytes >= KiB && bytes % KiB == 0) return std::to_string(bytes / KiB) + " KiB";
  return std::to_string(bytes) + " B";
}

std::optional<int64_t> parse_bytes(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])) != 0) ++digits;
  if (digits == 0 || digits > 12) return std::nullopt;
  int64_t value = std::stoll(std::string(text.substr(0, digits)));
  std::string unit(text.substr(digits));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.empty() || unit == "B") return value;
  if (unit == "K" || unit == "KIB") return value * 1024;
  if (unit == "M" || unit == "MIB") return value * 1024 * 1024;
  return std::nullopt;
}

namespace {

double bus_factor(Collective op, int ranks) {
  const double n = ranks;
  switch (op) {
    case Collective::AllReduce: return 2.0 * (n - 1.0) / n;
    case Collective::Broadcast: return 1.0;
    case Collective::AllGather: return (n - 1.0) / n;
  }
  return 1.0;
}

}  // namespace

double algbw_gbps(Collective op, int64_t bytes, int ranks, double seconds) {
  const double moved = op == Collective::AllGather ? static_cast<double>(bytes) * ranks : static_cast<double>(bytes);
  return seconds > 0.0 ? moved / seconds / 1e9 : 0.0;
}

double busbw_gbps(Collective op, int64_t bytes, int ranks, double seconds) {
  return algbw_gbps(op, bytes, ranks, seconds) * bus_factor(op, ranks);
}

std::string bus_factor_text(Collective op, int ranks) {
  char value[32];
  std::snprintf(value, sizeof(value), "%.2f", bus_factor(op, ranks));
  switch (op) {
    case Collective::AllReduce: return std::string("2(n-1)/n = ") + value;
    case Collective::Broadcast: return std::string("1");
    case Collective::AllGather: return std::string("(n-1)/n = ") + value;
  }
  return value;
}

Buffers make_buffers(Collective op, int64_t bytes, int ranks) {
  Buffers buffers;
  buffers.count = bytes / static_cast<int64_t>(sizeof(float));
  const auto options = at::TensorOptions().dtype(at::kFloat);
  if (op == Collective::AllGather) {
    buffers.input = at::empty({buffers.count}, options);
    buffers.output = at::empty({buffers.count * ranks}, options);
  } else {
    buffers.data = at::empty({buffers.count}, options);
  }
  fill_for_timing(buffers);  // fault the pages in now, not inside a timed loop
  return buffers;
}

void fill_for_validation(Collective op, Buffers& buffers, int rank) {
  const auto mine = static_cast<float>(rank + 1);
  switch (op) {
    case Collective::AllReduce:
    case Collective::Broadcast: buffers.data.fill_(mine); break;
    case Collective::AllGather:
      buffers.input.fill_(mine);
      buffers.output.fill_(-1.0F);
      break;
  }
}

std::string check_validation(Collective op, const Buffers& buffers, int ranks) {
  auto first_wrong = [](const at::Tensor& tensor, auto expected_at) -> std::string {
    const float* values = tensor.data_ptr<float>();
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      const float expected = expected_at(i);
      if (values[i] != expected) {
        return "element " + std::to_string(i) + " is " + std::to_string(values[i]) + ", expected " +
               std::to_string(expected);
      }
    }
    return {};
  };
  switch (op) {
    case Collective::AllReduce: {
      const auto sum = static_cast<float>(ranks * (ranks + 1) / 2);
      return first_wrong(buffers.data, [sum](int64_t) { return sum; });
    }
    case Collective::Broadcast: return first_wrong(buffers.data, [](int64_t) { return 1.0F; });
    case Collective::AllGather: {
      const int64_t count = buffers.count;
      return first_wrong(buffers.output, [count](int64_t i) { return static_cast<float>(i / count + 1); });
    }
  }
  return "unknown collective";
}

void fill_for_timing(Buffers& buffers) {
  for (at::Tensor* tensor : {&buffers.data, &buffers.input, &buffers.output}) {
    if (tensor->defined()) tensor->zero_();
  }
}

}  // namespace bench
