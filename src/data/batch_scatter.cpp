#include "accelerate/data/batch_scatter.hpp"

#include <torch/torch.h>

#include <array>
#include <sstream>
#include <utility>

#include "accelerate/error.hpp"

namespace accelerate {

namespace {

// Header layout (int64): status, failure kind / rows per process, real rows,
// last, then for data and for target: dtype, sample rank (-1: undefined
// tensor), up to kMaxSampleDims extents.
constexpr int kMaxSampleDims = 16;
constexpr int kFieldSlots = 2 + kMaxSampleDims;
constexpr int kDataSlot = 4;
constexpr int kTargetSlot = kDataSlot + kFieldSlots;
constexpr int kHeaderSize = kTargetSlot + kFieldSlots;

enum Status : std::int64_t { kSlice = 0, kEnd = 1, kFailure = 2 };
enum FailureKind : std::int64_t { kConfigFailure = 0, kOtherFailure = 1 };

std::string describe(const torch::Tensor& tensor) {
  if (!tensor.defined()) return "undefined";
  std::ostringstream text;
  text << tensor.sizes().slice(1) << " " << tensor.scalar_type();
  return text.str();
}

void encode_field(std::vector<std::int64_t>& header, int slot, const torch::Tensor& tensor) {
  if (!tensor.defined()) {
    header[slot + 1] = -1;
    return;
  }
  header[slot] = static_cast<std::int64_t>(tensor.scalar_type());
  const auto sample_shape = tensor.sizes().slice(1);
  header[slot + 1] = static_cast<std::int64_t>(sample_shape.size());
  for (std::size_t d = 0; d < sample_shape.size(); ++d) header[slot + 2 + d] = sample_shape[d];
}

torch::Tensor allocate_field(const std::vector<std::int64_t>& header, int slot, std::int64_t rows) {
  const std::int64_t rank = header[slot + 1];
  if (rank < 0) return {};
  std::vector<std::int64_t> shape{rows};
  for (std::int64_t d = 0; d < rank; ++d) shape.push_back(header[slot + 2 + d]);
  return torch::empty(shape, torch::TensorOptions().dtype(static_cast<torch::ScalarType>(header[slot])));
}

}  // namespace

// Per-sample shape and dtype of the first batch, as text for the messages.
struct BatchScatter::Layout {
  std::string data;
  std::string target;
};

BatchScatter::BatchScatter(const State& state, ProcessGroupOptions options)
    : group_(ProcessGroup::world(state, std::move(options))), rank_(group_->rank()), size_(group_->size()) {}

BatchScatter::~BatchScatter() = default;

void BatchScatter::check_layout(const torch::data::Example<>& batch) {
  auto refuse = [&](const std::string& text) {
    broadcast_failure(text, kConfigFailure);
    throw ConfigError(detail::where() + " DataLoaderDispatcher: " + text);
  };
  const std::pair<const char*, const torch::Tensor*> fields[] = {{"data", &batch.data}, {"target", &batch.target}};
  for (const auto& [field, tensor] : fields) {
    if (tensor->defined() && tensor->dim() - 1 > kMaxSampleDims) {
      refuse(std::string("the ") + field + " samples have " + std::to_string(tensor->dim() - 1) +
             " dimensions; a dispatching loader sends at most " + std::to_string(kMaxSampleDims) +
             ". Reshape the samples, or set dispatch_batches = false.");
    }
  }
  if (!layout_) {
    layout_ = std::make_unique<Layout>(Layout{describe(batch.data), describe(batch.target)});
    return;
  }
  const std::string now[] = {describe(batch.data), describe(batch.target)};
  const std::string* first[] = {&layout_->data, &layout_->target};
  for (int f = 0; f < 2; ++f) {
    if (now[f] != *first[f]) {
      refuse(std::string("this global batch's ") + fields[f].first + " samples are " + now[f] +
             ", but the first batch dispatched had " + *first[f] +
             ". A dispatching loader sends every batch in the layout of the first; make the dataset return "
             "samples of one shape and dtype (pad or resize them), or set dispatch_batches = false so that each "
             "process loads its own batches.");
    }
  }
}

std::optional<BatchScatter::Slice> BatchScatter::exchange(std::optional<Global> global) {
  std::vector<std::int64_t> header(kHeaderSize, 0);
  if (rank_ == 0) {
    if (!global) {
      header[0] = kEnd;
    } else {
      const auto rows = global->batch.data.size(0);
      if (rows == 0 || rows % size_ != 0) {
        const std::string text = "the global batch has " + std::to_string(rows) +
                                 " rows, which is not a positive multiple of the " + std::to_string(size_) +
                                 " processes (an error in the dispatcher; please report it).";
        broadcast_failure(text, kOtherFailure);
        throw Error(detail::where() + " BatchScatter: " + text);
      }
      check_layout(global->batch);
      header[0] = kSlice;
      header[1] = rows / size_;
      header[2] = global->real_rows;
      header[3] = global->last ? 1 : 0;
      encode_field(header, kDataSlot, global->batch.data);
      encode_field(header, kTargetSlot, global->batch.target);
    }
  }
  at::Tensor wire = torch::from_blob(header.data(), {kHeaderSize}, torch::kInt64);
  group_->broadcast(wire, {.root = 0, .timeout = {}});
  if (header[0] == kEnd) return std::nullopt;
  if (header[0] == kFailure) {
    c10::IValue text;
    group_->broadcast_object(text, 0);
    const std::string message = detail::where() +
                                " DataLoaderDispatcher: the main process (rank 0), which loads "
                                "the batches, failed: " +
                                text.toStringRef();
    if (header[1] == kConfigFailure) throw ConfigError(message);
    throw Error(message);
  }
  if (rank_ != 0) return receive_slice(header);

  Slice slice{{}, header[2], header[3] != 0};
  auto send = [&](const torch::Tensor& full) -> torch::Tensor {
    if (!full.defined()) return {};
    const torch::Tensor input = full.contiguous();
    auto shape = input.sizes().vec();
    shape[0] = header[1];
    torch::Tensor output = torch::empty(shape, input.options());
    group_->scatter(output, input, {.root = 0, .timeout = {}});
    bytes_sent_ += static_cast<std::int64_t>(input.nbytes()) / size_ * (size_ - 1);
    return output;
  };
  slice.batch.data = send(global->batch.data);
  slice.batch.target = send(global->batch.target);
  rows_sent_ += (size_ - 1) * header[1];
  return slice;
}

std::optional<BatchScatter::Slice> BatchScatter::receive_slice(const std::vector<std::int64_t>& header) {
  Slice slice{{}, header[2], header[3] != 0};
  auto receive = [&](int slot) -> torch::Tensor {
    torch::Tensor output = allocate_field(header, slot, header[1]);
    if (output.defined()) group_->scatter(output, torch::Tensor(), {.root = 0, .timeout = {}});
    return output;
  };
  slice.batch.data = receive(kDataSlot);
  slice.batch.target = receive(kTargetSlot);
  return slice;
}

void BatchScatter::fail(const std::string& message) { broadcast_failure(message, kOtherFailure); }

void BatchScatter::broadcast_failure(const std::string& message, std::int64_t kind) {
  std::vector<std::int64_t> header(kHeaderSize, 0);
  header[0] = kFailure;
  header[1] = kind;
  at::Tensor wire = torch::from_blob(header.data(), {kHeaderSize}, torch::kInt64);
  group_->broadcast(wire, {.root = 0, .timeout = {}});
  c10::IValue text(message);
  group_->broadcast_object(text, 0);
}

}  // namespace accelerate
