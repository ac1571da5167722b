#include "accelerate/data/batch_scatter.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <sstream>
#include <utility>

#include "accelerate/error.hpp"

namespace accelerate {

namespace {

// Fixed header (int64): status, failure kind / rows per process, real rows,
// last, bytes of the description that follows (0: the previous one holds).
constexpr int kHeaderSize = 5;

enum Status : std::int64_t { kSlice = 0, kEnd = 1, kFailure = 2 };
enum FailureKind : std::int64_t { kConfigFailure = 0, kOtherFailure = 1 };

// The structure's text: "T" a tensor; "E" a data/target example (two
// tensors); "D<n>:" a dict of n entries, each "<bytes>:<key>" and its value;
// "L<n>:" a list and "U<n>:" a tuple of n values.
constexpr char kPayloadTensor = 'T';
constexpr char kPayloadExample = 'E';
constexpr char kPayloadDict = 'D';
constexpr char kPayloadList = 'L';
constexpr char kPayloadTuple = 'U';

[[noreturn]] void scatter_error(const std::string& what) { throw ConfigError("DataLoaderDispatcher: " + what); }

std::string scatter_type_name(const c10::IValue& value) {
  if (value.isNone()) return "None";
  if (value.isString()) return "a string";
  if (value.isInt()) return "an int";
  if (value.isDouble()) return "a double";
  if (value.isBool()) return "a bool";
  if (value.isGenericDict()) return "a dict with non-string keys";
  return "a " + value.tagKind();
}

void flatten_into_payload(const c10::IValue& value, const std::string& path, detail::ScatterPayload& out) {
  if (value.isTensor()) {
    out.structure += kPayloadTensor;
    out.leaves.push_back(value.toTensor());
    out.names.push_back(path.empty() ? "the batch" : path);
    return;
  }
  if (value.isTuple() || value.isList()) {
    const bool tuple = value.isTuple();
    const auto elements = tuple ? value.toTupleRef().elements().vec() : value.toListRef().vec();
    out.structure += (tuple ? kPayloadTuple : kPayloadList) + std::to_string(elements.size()) + ":";
    for (std::size_t i = 0; i < elements.size(); ++i)
      flatten_into_payload(elements[i], path + "[" + std::to_string(i) + "]", out);
    return;
  }
  if (value.isGenericDict()) {
    const c10::impl::GenericDict dict = value.toGenericDict();
    bool string_keys = true;
    for (const auto& entry : dict) string_keys = string_keys && entry.key().isString();
    if (string_keys) {
      out.structure += kPayloadDict + std::to_string(dict.size()) + ":";
      for (const auto& entry : dict) {
        const std::string& key = entry.key().toStringRef();
        out.structure += std::to_string(key.size()) + ":" + key;
        flatten_into_payload(entry.value(), path + "['" + key + "']", out);
      }
      return;
    }
  }
  scatter_error("the batch's " + (path.empty() ? std::string("value") : path) + " is " + scatter_type_name(value) +
                ", but a dispatching loader scatters tensors only, cut along their first dimension (nested in "
                "lists, tuples and string-keyed dicts). Give the loader a collate function that returns tensors, "
                "or set dispatch_batches = false so that each process loads its own batches.");
}

// Reads the structure back, taking the leaves in order.
class PayloadReader {
 public:
  PayloadReader(const std::string& text, std::vector<at::Tensor>& leaves) : text_(text), leaves_(leaves) {}

  c10::IValue value() {
    const char kind = text_.at(at_++);
    if (kind == kPayloadTensor) return leaves_.at(leaf_++);
    const std::size_t count = number();
    if (kind == kPayloadDict) {
      std::vector<std::pair<std::string, c10::IValue>> entries;
      bool tensors = true;
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t bytes = number();
        std::string key = text_.substr(at_, bytes);
        at_ += bytes;
        entries.emplace_back(std::move(key), value());
        tensors = tensors && entries.back().second.isTensor();
      }
      c10::impl::GenericDict dict(c10::StringType::get(),
                                  tensors ? c10::TypePtr(c10::TensorType::get()) : c10::TypePtr(c10::AnyType::get()));
      for (auto& [key, item] : entries) dict.insert(key, std::move(item));
      return dict;
    }
    std::vector<c10::IValue> elements;
    for (std::size_t i = 0; i < count; ++i) elements.push_back(value());
    if (kind == kPayloadTuple) return c10::ivalue::Tuple::create(std::move(elements));
    const bool tensors = std::all_of(elements.begin(), elements.end(), [](const auto& v) { return v.isTensor(); });
    c10::impl::GenericList list(tensors ? c10::TypePtr(c10::TensorType::get()) : c10::TypePtr(c10::AnyType::get()));
    for (auto& element : elements) list.push_back(std::move(element));
    return list;
  }
  [[nodiscard]] bool done() const noexcept { return at_ == text_.size() && leaf_ == leaves_.size(); }

 private:
  // "<digits>:"
  std::size_t number() {
    const std::size_t colon = text_.find(':', at_);
    const std::size_t n = std::stoull(text_.substr(at_, colon - at_));
    at_ = colon + 1;
    return n;
  }

  const std::string& text_;
  std::vector<at::Tensor>& leaves_;
  std::size_t at_ = 0;
  std::size_t leaf_ = 0;
};

[[noreturn]] void wrong_payload(const std::string& expected) {
  throw Error("DataLoaderDispatcher: received a batch that is not " + expected +
              " (the processes build loaders of different batch types; please report it).");
}

c10::IValue unflatten_payload(detail::ScatterPayload& payload) {
  PayloadReader reader(payload.structure, payload.leaves);
  c10::IValue value = reader.value();
  if (!reader.done()) wrong_payload("one structure of tensors");
  return value;
}

std::string scatter_describe(const at::Tensor& tensor) {
  if (!tensor.defined()) return "undefined";
  std::ostringstream text;
  text << tensor.sizes().slice(1) << " " << tensor.scalar_type();
  return text.str();
}

std::string scatter_list_names(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

}  // namespace

namespace detail {

ScatterPayload to_payload(torch::data::Example<> batch) {
  return {std::string(1, kPayloadExample), {std::move(batch.data), std::move(batch.target)}, {"data", "target"}};
}

ScatterPayload to_payload(at::Tensor batch) {
  return {std::string(1, kPayloadTensor), {std::move(batch)}, {"the batch"}};
}

ScatterPayload to_payload(std::map<std::string, at::Tensor> batch) {
  ScatterPayload payload;
  payload.structure = kPayloadDict + std::to_string(batch.size()) + ":";
  for (auto& [key, tensor] : batch) {
    payload.structure += std::to_string(key.size()) + ":" + key + kPayloadTensor;
    payload.leaves.push_back(std::move(tensor));
    payload.names.push_back("['" + key + "']");
  }
  return payload;
}

ScatterPayload to_payload(c10::Dict<std::string, at::Tensor> batch) {
  ScatterPayload payload;
  payload.structure = kPayloadDict + std::to_string(batch.size()) + ":";
  for (const auto& entry : batch) {
    payload.structure += std::to_string(entry.key().size()) + ":" + entry.key() + kPayloadTensor;
    payload.leaves.push_back(entry.value());
    payload.names.push_back("['" + entry.key() + "']");
  }
  return payload;
}

ScatterPayload to_payload(c10::IValue batch) {
  ScatterPayload payload;
  flatten_into_payload(batch, "", payload);
  return payload;
}

void from_payload(ScatterPayload payload, torch::data::Example<>& batch) {
  if (payload.structure != std::string(1, kPayloadExample) || payload.leaves.size() != 2) wrong_payload("an example");
  batch = {std::move(payload.leaves[0]), std::move(payload.leaves[1])};
}

void from_payload(ScatterPayload payload, at::Tensor& batch) {
  if (payload.structure != std::string(1, kPayloadTensor) || payload.leaves.size() != 1) wrong_payload("a tensor");
  batch = std::move(payload.leaves[0]);
}

void from_payload(ScatterPayload payload, std::map<std::string, at::Tensor>& batch) {
  if (payload.structure.empty() || payload.structure[0] != kPayloadDict) wrong_payload("a map of tensors");
  const c10::IValue value = unflatten_payload(payload);
  batch.clear();
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.value().isTensor()) wrong_payload("a map of tensors");
    batch.emplace(entry.key().toStringRef(), entry.value().toTensor());
  }
}

void from_payload(ScatterPayload payload, c10::Dict<std::string, at::Tensor>& batch) {
  if (payload.structure.empty() || payload.structure[0] != kPayloadDict) wrong_payload("a dict of tensors");
  const c10::IValue value = unflatten_payload(payload);
  batch = c10::Dict<std::string, at::Tensor>();
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.value().isTensor()) wrong_payload("a dict of tensors");
    batch.insert(entry.key().toStringRef(), entry.value().toTensor());
  }
}

void from_payload(ScatterPayload payload, c10::IValue& batch) {
  if (payload.structure == std::string(1, kPayloadExample)) wrong_payload("an IValue");
  batch = unflatten_payload(payload);
}

}  // namespace detail

// A batch's description: its structure, and each tensor's dtype and
// per-sample shape (rank -1: an undefined tensor).
struct BatchScatter::Layout {
  std::string structure;
  std::vector<std::int64_t> dtypes;
  std::vector<std::vector<std::int64_t>> shapes;  // per sample
  std::vector<bool> defined;

  static Layout of(const detail::ScatterPayload& batch) {
    Layout layout{batch.structure, {}, {}, {}};
    for (const at::Tensor& leaf : batch.leaves) {
      layout.defined.push_back(leaf.defined());
      layout.dtypes.push_back(leaf.defined() ? static_cast<std::int64_t>(leaf.scalar_type()) : 0);
      layout.shapes.push_back(leaf.defined() ? leaf.sizes().slice(1).vec() : std::vector<std::int64_t>{});
    }
    return layout;
  }

  [[nodiscard]] std::string text() const {
    std::string out = std::to_string(structure.size()) + "\n" + structure;
    for (std::size_t i = 0; i < dtypes.size(); ++i) {
      out += " " + std::to_string(dtypes[i]) + " " +
             std::to_string(defined[i] ? static_cast<std::int64_t>(shapes[i].size()) : -1);
      for (const std::int64_t extent : shapes[i]) out += " " + std::to_string(extent);
    }
    return out;
  }

  static Layout parse(const std::string& text) {
    const std::size_t newline = text.find('\n');
    const std::size_t bytes = std::stoull(text.substr(0, newline));
    Layout layout{text.substr(newline + 1, bytes), {}, {}, {}};
    std::istringstream rest(text.substr(newline + 1 + bytes));
    std::int64_t dtype = 0;
    std::int64_t rank = 0;
    while (rest >> dtype >> rank) {
      layout.dtypes.push_back(dtype);
      layout.defined.push_back(rank >= 0);
      std::vector<std::int64_t> shape(static_cast<std::size_t>(std::max<std::int64_t>(rank, 0)));
      for (auto& extent : shape) rest >> extent;
      layout.shapes.push_back(std::move(shape));
    }
    return layout;
  }
};

BatchScatter::BatchScatter(const State& state, ProcessGroupOptions options)
    : group_(ProcessGroup::world(state, std::move(options))), rank_(group_->rank()), size_(group_->size()) {}

BatchScatter::~BatchScatter() = default;

void BatchScatter::check_layout(const detail::ScatterPayload& batch, const Layout& now) {
  auto refuse = [&](const std::string& text) {
    broadcast_failure(text, kConfigFailure);
    scatter_error(text);
  };
  if (!first_) {
    first_ = std::make_unique<Layout>(now);
    return;
  }
  const Layout& first = *first_;
  if (now.structure != first.structure) {
    refuse("this global batch holds " + scatter_list_names(batch.names) +
           ", which is not the structure of the first batch dispatched. A dispatching loader sends every batch "
           "with the keys and nesting of the first; make the collate function return the same keys for every "
           "batch, or set dispatch_batches = false so that each process loads its own batches.");
  }
  const bool example = now.structure == std::string(1, kPayloadExample);
  for (std::size_t i = 0; i < now.dtypes.size(); ++i) {
    const bool same_type = now.defined[i] == first.defined[i] && now.dtypes[i] == first.dtypes[i] &&
                           now.shapes[i].size() == first.shapes[i].size();
    if (example && (!same_type || now.shapes[i] != first.shapes[i])) {
      const std::string was = first.defined[i] ? [&] {
        std::ostringstream text;
        text << at::IntArrayRef(first.shapes[i]) << " " << static_cast<at::ScalarType>(first.dtypes[i]);
        return text.str();
      }()
                                               : "undefined";
      refuse("this global batch's " + batch.names[i] + " samples are " + scatter_describe(batch.leaves[i]) +
             ", but the first batch dispatched had " + was +
             ". A dispatching loader sends every batch in the layout of the first; make the dataset return "
             "samples of one shape and dtype (pad or resize them), or set dispatch_batches = false so that each "
             "process loads its own batches.");
    }
    if (!example && !same_type) {
      std::ostringstream text;
      text << "this global batch's " << batch.names[i] << " is ";
      if (now.defined[i]) {
        text << static_cast<at::ScalarType>(now.dtypes[i]) << " with " << now.shapes[i].size();
      } else {
        text << "undefined";
      }
      text << ", but the first batch dispatched had ";
      if (first.defined[i]) {
        text << static_cast<at::ScalarType>(first.dtypes[i]) << " with " << first.shapes[i].size();
      } else {
        text << "undefined";
      }
      text << " dimensions per sample. A dispatching loader sends every batch with the dtypes of the first (the "
              "shapes may change from batch to batch); return the same dtypes from every batch, or set "
              "dispatch_batches = false so that each process loads its own batches.";
      refuse(text.str());
    }
  }
}

std::optional<BatchScatter::Slice> BatchScatter::exchange(std::optional<Global> global) {
  std::vector<std::int64_t> header(kHeaderSize, 0);
  std::string description;
  if (rank_ == 0) {
    if (!global) {
      header[0] = kEnd;
    } else {
      const detail::ScatterPayload& batch = global->batch;
      std::int64_t rows = -1;
      for (std::size_t i = 0; i < batch.leaves.size(); ++i) {
        const at::Tensor& leaf = batch.leaves[i];
        if (!leaf.defined()) continue;
        if (leaf.dim() == 0) {
          const std::string text = batch.names[i] +
                                   " is a 0-dimensional tensor, but a dispatching loader cuts every tensor of a "
                                   "batch along its first dimension, one row per sample. Give it one.";
          broadcast_failure(text, kConfigFailure);
          scatter_error(text);
        }
        if (rows < 0) rows = leaf.size(0);
        if (leaf.size(0) != rows) {
          const std::string text = batch.names[i] + " has " + std::to_string(leaf.size(0)) + " rows, but " +
                                   batch.names[0] + " has " + std::to_string(rows) +
                                   ". A dispatching loader cuts every tensor of a batch alike along its first "
                                   "dimension, so each must hold one row per sample.";
          broadcast_failure(text, kConfigFailure);
          scatter_error(text);
        }
      }
      if (rows <= 0 || rows % size_ != 0) {
        const std::string text = "the global batch has " + std::to_string(rows) +
                                 " rows, which is not a positive multiple of the " + std::to_string(size_) +
                                 " processes (an error in the dispatcher; please report it).";
        broadcast_failure(text, kOtherFailure);
        throw Error("BatchScatter: " + text);
      }
      Layout now = Layout::of(batch);
      check_layout(batch, now);
      description = now.text();
      header[0] = kSlice;
      header[1] = rows / size_;
      header[2] = global->real_rows;
      header[3] = global->last ? 1 : 0;
      if (description != description_) {
        header[4] = static_cast<std::int64_t>(description.size());
        description_ = description;
        last_ = std::make_unique<Layout>(std::move(now));
      }
    }
  }
  at::Tensor wire = torch::from_blob(header.data(), {kHeaderSize}, torch::kInt64);
  group_->broadcast(wire, {.root = 0, .timeout = {}});
  if (header[0] == kEnd) return std::nullopt;
  if (header[0] == kFailure) {
    c10::IValue text;
    group_->broadcast_object(text, 0);
    const std::string message =
        "DataLoaderDispatcher: the main process (rank 0), which loads the batches, failed: " + text.toStringRef();
    if (header[1] == kConfigFailure) throw ConfigError(message);
    throw Error(message);
  }
  if (header[4] > 0) {
    // The description changed: every key, dtype and per-sample shape.
    if (rank_ != 0) description.resize(static_cast<std::size_t>(header[4]));
    at::Tensor bytes = torch::from_blob(description.data(), {header[4]}, torch::kUInt8);
    group_->broadcast(bytes, {.root = 0, .timeout = {}});
    if (rank_ != 0) {
      description_ = description;
      last_ = std::make_unique<Layout>(Layout::parse(description_));
    }
  }
  if (rank_ != 0) return receive_slice(header);

  Slice slice{{global->batch.structure, {}, global->batch.names}, header[2], header[3] != 0};
  for (const at::Tensor& full : global->batch.leaves) {
    if (!full.defined()) {
      slice.batch.leaves.emplace_back();
      continue;
    }
    const at::Tensor input = full.contiguous();
    auto shape = input.sizes().vec();
    shape[0] = header[1];
    at::Tensor output = torch::empty(shape, input.options());
    group_->scatter(output, input, {.root = 0, .timeout = {}});
    bytes_sent_ += static_cast<std::int64_t>(input.nbytes()) / size_ * (size_ - 1);
    slice.batch.leaves.push_back(std::move(output));
  }
  rows_sent_ += (size_ - 1) * header[1];
  return slice;
}

std::optional<BatchScatter::Slice> BatchScatter::receive_slice(const std::vector<std::int64_t>& header) {
  if (!last_) throw Error("BatchScatter: a slice arrived before its description.");
  const Layout& layout = *last_;
  Slice slice{{layout.structure, {}, {}}, header[2], header[3] != 0};
  for (std::size_t i = 0; i < layout.dtypes.size(); ++i) {
    if (!layout.defined[i]) {
      slice.batch.leaves.emplace_back();
      continue;
    }
    std::vector<std::int64_t> shape{header[1]};
    shape.insert(shape.end(), layout.shapes[i].begin(), layout.shapes[i].end());
    at::Tensor output =
        torch::empty(shape, torch::TensorOptions().dtype(static_cast<torch::ScalarType>(layout.dtypes[i])));
    group_->scatter(output, at::Tensor(), {.root = 0, .timeout = {}});
    slice.batch.leaves.push_back(std::move(output));
  }
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
