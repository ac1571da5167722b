// BatchScatter: the collective step of a DataLoaderDispatcher. The main
// process holds the next global batch; each process receives only its own
// rows (a scatter, not a broadcast of everything), so every sample crosses
// the network at most once.
//
// One exchange is three collectives on the State's world: a small header
// broadcast (status, rows per process, dtypes and per-sample shapes), then a
// scatter of the data and one of the targets. A failure on the main process
// (the dataset threw, a batch changed shape) is broadcast in the header, and
// every process throws the same message, so no rank is left waiting.
#pragma once

#include <torch/types.h>
#include <torch/data/example.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/runtime/state.hpp"

namespace accelerate {

class BatchScatter {
 public:
  /// What the main process sends in one exchange.
  struct Global {
    /// The global batch: rows are samples; the row count must be a multiple
    /// of the world size (the dispatcher completes a short last batch).
    torch::data::Example<> batch;
    /// Rows that are real samples (the rest repeat earlier ones).
    std::int64_t real_rows = 0;
    /// No batch follows this one in the pass.
    bool last = false;
  };

  /// What every process receives.
  struct Slice {
    torch::data::Example<> batch;  ///< this process's rows, on the CPU
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
  /// Throws ConfigError on every process when the batch's dtypes or
  /// per-sample shapes differ from the first batch this object sent.
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
  void check_layout(const torch::data::Example<>& batch);
  void broadcast_failure(const std::string& message, std::int64_t kind);

  std::unique_ptr<ProcessGroup> group_;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<Layout> layout_;  // of the first batch sent
  std::int64_t rows_sent_ = 0;
  std::int64_t bytes_sent_ = 0;
};

}  // namespace accelerate
