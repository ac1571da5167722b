// BatchScatter: the collective step of a DataLoaderDispatcher. The main
// process holds the next global batch; each process receives only its own
// rows (a scatter, not a broadcast of everything), so every sample crosses
// the network at most once.
//
// A batch is any structure of tensors whose first dimension counts the
// samples: data/target examples, a tensor, string-keyed maps and dicts of
// tensors, and c10::IValue nests of tensors in lists, tuples and string-keyed
// dicts (the structures DefaultCollate and PaddingCollate build). Every
// tensor is cut alike along dimension 0.
//
// One exchange is a small fixed header broadcast (status, rows per process,
// real rows, the length of the description), the description when it
// differs from the previous batch's (the structure with every key, and each
// tensor's dtype and per-sample shape), then one scatter per tensor. A
// failure on the main process (the dataset threw, a batch changed its keys
// or dtypes) is broadcast in the header, and every process throws the same
// message, so no rank is left waiting.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>

#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/data/example_fwd.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate {

namespace detail {

/// A batch as BatchScatter sends it: its nesting (keys, lists, tuples) as
/// text, its tensors in order, and their names for messages ("data",
/// "['input_ids']", "[1]['x']").
struct ScatterPayload {
  std::string structure;
  std::vector<at::Tensor> leaves;
  std::vector<std::string> names;
};

// A batch flattened into its payload, and back; one pair per structure.
ScatterPayload to_payload(TensorExample batch);
ScatterPayload to_payload(at::Tensor batch);
ScatterPayload to_payload(std::map<std::string, at::Tensor> batch);
ScatterPayload to_payload(c10::Dict<std::string, at::Tensor> batch);
ScatterPayload to_payload(c10::IValue batch);
void from_payload(ScatterPayload payload, TensorExample& batch);
void from_payload(ScatterPayload payload, at::Tensor& batch);
void from_payload(ScatterPayload payload, std::map<std::string, at::Tensor>& batch);
void from_payload(ScatterPayload payload, c10::Dict<std::string, at::Tensor>& batch);
void from_payload(ScatterPayload payload, c10::IValue& batch);

}  // namespace detail

/// A batch type a dispatching loader can scatter (see the top of this file).
template <class B>
concept ScatterableBatch = std::default_initializable<B> && requires(B batch, detail::ScatterPayload payload) {
  { detail::to_payload(std::move(batch)) } -> std::same_as<detail::ScatterPayload>;
  detail::from_payload(std::move(payload), batch);
};

class BatchScatter {
 public:
  /// What the main process sends in one exchange.
  struct Global {
    /// The global batch (detail::to_payload): rows are samples; the row
    /// count must be a multiple of the world size (the dispatcher completes
    /// a short last batch).
    detail::ScatterPayload batch;
    /// Rows that are real samples (the rest repeat earlier ones).
    std::int64_t real_rows = 0;
    /// No batch follows this one in the pass.
    bool last = false;
  };

  /// What every process receives.
  struct Slice {
    detail::ScatterPayload batch;  ///< this process's rows, on the CPU (detail::from_payload)
    std::int64_t real_rows = 0;    ///< of the global batch
    bool last = false;
  };

  /// Collective over state's world (it creates its own ProcessGroup).
  explicit BatchScatter(const State& state, ProcessGroupOptions options = {});
  ~BatchScatter();
  BatchScatter(const BatchScatter&) = delete;
  BatchScatter& operator=(const BatchScatter&) = delete;

  /// Collective. The main process passes the next global batch, or
  /// std::nullopt when the pass has no (more) batches; the others pass
  /// std::nullopt. Returns this process's slice, or std::nullopt at the end.
  /// Throws ConfigError on every process when the batch's structure (keys,
  /// nesting) or dtypes differ from the first batch this object sent, and,
  /// for data/target examples, when their per-sample shapes do (a keyed
  /// batch may change its shapes, as padding to the longest sample does).
  std::optional<Slice> exchange(std::optional<Global> global);

  /// Main process only, collective: tells the other processes the pass
  /// failed with `message`; they throw Error with it from exchange(), and
  /// this call returns so that the caller can rethrow its own exception.
  void fail(const std::string& message);

  [[nodiscard]] bool is_main() const noexcept { return rank_ == 0; }
  /// Rows the main process sent to other processes so far (its own slice
  /// stays local): each dispatched sample once.
  [[nodiscard]] std::int64_t rows_sent() const noexcept { return rows_sent_; }
  [[nodiscard]] std::int64_t bytes_sent() const noexcept { return bytes_sent_; }

 private:
  struct Layout;
  std::optional<Slice> receive_slice(const std::vector<std::int64_t>& header);
  void check_layout(const detail::ScatterPayload& batch, const Layout& now);
  void broadcast_failure(const std::string& message, std::int64_t kind);

  std::unique_ptr<ProcessGroup> group_;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<Layout> first_;  // of the first batch sent (main process)
  std::string description_;        // of the last batch sent or received
  std::unique_ptr<Layout> last_;   // description_, parsed
  std::int64_t rows_sent_ = 0;
  std::int64_t bytes_sent_ = 0;
};

}  // namespace accelerate
