// What every prepared loader offers the training loop, whatever reads the
// data (DataLoaderShard: each process its own batches; DataLoaderDispatcher:
// the main process, scattering slices; StreamDataLoaderShard: each process
// its slice of a stream). Two layers: DataLoaderBase is everything that does
// not depend on the batch type (epochs, resume position, end_of_dataloader),
// through which the Accelerator and the checkpoints hold loaders;
// BasicDataLoader<Batch> adds iteration over batches of one type.
// DataLoader is the loader of torch::data::Example<> batches.
//
//   for (const torch::data::Example<>& batch : loader) { ... }
//
// One pass at a time: begin() abandons the previous pass and its iterators.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "accelerate/data/batch_sampler_shard.hpp"
#include "accelerate/data/example_fwd.hpp"
#include "accelerate/data/loader_state.hpp"
#include "accelerate/runtime/lifetime.hpp"

namespace at {
struct RecordFunction;
}  // namespace at

namespace accelerate {

class State;
class DataLoaderBase;
namespace detail {
class RngSynchronizer;

/// The span of one next-batch call in profiler traces
/// ("accelerate::data_loader_next"); records nothing, and allocates
/// nothing, when no profiler runs.
class NextBatchRange {
 public:
  NextBatchRange();
  NextBatchRange(const NextBatchRange&) = delete;
  NextBatchRange& operator=(const NextBatchRange&) = delete;
  ~NextBatchRange();

 private:
  std::unique_ptr<at::RecordFunction> range_;  // null unless a profiler records the range
};
}  // namespace detail

/// Told when a loader starts and finishes a pass (the Accelerator's
/// GradientState uses it to know which loader the loop is iterating, as
/// Accelerate's loaders register themselves with GradientState).
class PassListener {
 public:
  virtual void pass_started(const DataLoaderBase& loader) = 0;
  virtual void pass_finished(const DataLoaderBase& loader) = 0;

 protected:
  ~PassListener() = default;
};

/// The part of a loader that does not depend on its batch type.
class DataLoaderBase {
 public:
  virtual ~DataLoaderBase() = default;

  /// Moves to `epoch` (changes a shuffled order). Without set_epoch, the
  /// epoch advances by one when begin() follows a complete pass (Accelerate's
  /// iteration counter); a pass the loop abandoned does not advance it.
  /// After load_state_dict, setting the loaded epoch keeps the resume
  /// position. Throws ConfigError for a negative epoch.
  void set_epoch(std::int64_t epoch);
  [[nodiscard]] std::int64_t epoch() const noexcept { return position_.epoch; }
  /// True while the loop holds this process's last batch of the pass: set
  /// when that batch is handed out, before the loop body runs.
  [[nodiscard]] bool end_of_dataloader() const noexcept { return end_of_dataloader_; }
  /// Real samples in the last global batch modulo total_batch_size() (0: it
  /// was full), for gather_for_metrics; -1 with drop_last or while unknown.
  [[nodiscard]] virtual std::int64_t remainder() const noexcept = 0;
  /// Samples per step of all processes together.
  [[nodiscard]] std::int64_t total_batch_size() const noexcept { return position_.global_batch_size; }
  /// Samples in the dataset; -1 for a stream.
  [[nodiscard]] virtual std::int64_t total_dataset_length() const noexcept = 0;
  /// The resumable position: advanced when a batch is handed out (not when
  /// a worker prefetches it), so identical on every rank between two steps.
  [[nodiscard]] const LoaderState& loader_state() const noexcept { return position_; }
  [[nodiscard]] LoaderState::Dict state_dict() const { return position_.state_dict(); }
  /// Restores a position saved by state_dict(), possibly on another world
  /// size with the same global batch size (resume_point's rules); the saved
  /// seed replaces this loader's. The next pass continues the saved epoch
  /// with exactly the batches not yet handed out; a state saved after the
  /// last batch of an epoch continues at the start of the next epoch, with
  /// any global batch size (nothing of the old epoch is left to batch alike).
  /// Throws ConfigError as resume_point() does.
  void load_state_dict(const LoaderState::Dict& dict);
  /// The next pass (only that one) starts after the first `num_batches`
  /// batches of its epoch, as if they had been handed out: the epoch the
  /// next begin() would run (the following one after a complete pass).
  /// Skipping all batches or more makes that pass empty. Batches are skipped
  /// by index, without loading them (streams read and discard them). Seeds:
  /// skip_first_batches. Throws ConfigError for a negative count.
  void skip_first_batches(std::int64_t num_batches);

  /// Whether a pass is under way (begin() ran and the last batch was not
  /// yet followed by the end of the pass).
  [[nodiscard]] bool in_pass() const noexcept { return in_pass_; }
  /// At most one listener; nullptr removes it. It must outlive the loader
  /// or be removed first.
  void set_pass_listener(PassListener* listener) noexcept { listener_ = listener; }

 protected:
  DataLoaderBase() = default;
  DataLoaderBase(const DataLoaderBase&) = default;
  DataLoaderBase& operator=(const DataLoaderBase&) = default;
  DataLoaderBase(DataLoaderBase&&) = default;
  DataLoaderBase& operator=(DataLoaderBase&&) = default;

  /// begin()'s work before the loader starts its pass: the epoch advance
  /// after a complete pass, the rng_types synchronisation, the listener.
  void open_pass();
  /// Before each next batch: the State must still be alive.
  void check_next() const;
  /// Abandons the current pass (its workers stop).
  virtual void drop_pass() = 0;
  /// How this loader shards, for resume_point's checks.
  [[nodiscard]] virtual BatchSamplerShardOptions shard_options() const = 0;
  /// Global batches in one epoch; -1 when unknown (streams).
  [[nodiscard]] virtual std::int64_t batches_per_epoch() const noexcept { return -1; }
  /// Whether a short last batch is dropped (the loader's drop_last).
  [[nodiscard]] virtual bool drops_last_batch() const noexcept { return false; }

  /// For start_pass: the batch index the pass starts at (where a loaded
  /// state stopped, else 0); resets the position and end_of_dataloader.
  std::int64_t begin_position();
  /// For the loaders: batch `index` of the pass was handed out; `last`
  /// marks this process's last batch, which completes the epoch
  /// (`epoch_batches` global batches, when known).
  void hand_out(std::int64_t index, bool last, std::int64_t epoch_batches = -1);
  /// The pass is over after `handed_out` batches.
  void finish_pass(std::int64_t handed_out);

  /// The State the loader communicates through (nullptr: none). Its end
  /// ends the loader's use (begin() and the next batch throw Error), and
  /// options.rng_types are synchronised over it at the start of every pass
  /// (collective now). Without a State, rng_types must be empty
  /// (ConfigError naming `component`).
  void attach_state(const State* state, const std::vector<std::string>& rng_types, std::string_view component);

  LoaderState position_;            ///< set up by the loader's constructor
  bool end_of_dataloader_ = false;  ///< on this process's last batch of the pass

 private:
  std::shared_ptr<detail::RngSynchronizer> rng_synchronizer_;
  LifetimeWatch state_watch_;
  bool resume_pending_ = false;   // load_state_dict ran; the next pass continues it
  bool epoch_completed_ = false;  // the last pass ran to its end; the next begin() moves to the next epoch
  bool in_pass_ = false;
  PassListener* listener_ = nullptr;
};

/// Loader of batches of type `B`: iteration over a pass.
template <class B>
class BasicDataLoader : public DataLoaderBase {
 public:
  using Batch = B;
  class iterator;

  /// Starts a pass (collective for loaders that communicate, and with
  /// rng_types, which are synchronised first) and makes its first batch
  /// current. The pass starts at batch 0 of the epoch, or, right after
  /// load_state_dict or skip_first_batches, where that left it.
  iterator begin() {
    open_pass();
    // An empty pass finishes at once (finish_pass told the listener); a pass
    // of this loader that was abandoned by the loop restarts here.
    return iterator(this, start_pass());
  }
  [[nodiscard]] std::default_sentinel_t end() const noexcept { return {}; }

 protected:
  /// Starts a pass; returns its first batch, or nullptr when it is empty.
  virtual const Batch* start_pass() = 0;
  /// Moves to the next batch of the pass; nullptr once the pass is over.
  virtual const Batch* next_batch() = 0;

 private:
  const Batch* advance() {
    check_next();
    const detail::NextBatchRange range;
    return next_batch();
  }
};

/// Input iterator over a pass; compares equal to end() when it is over.
template <class B>
class BasicDataLoader<B>::iterator {
 public:
  using iterator_concept = std::input_iterator_tag;
  using value_type = B;
  using difference_type = std::ptrdiff_t;
  using reference = const B&;

  iterator() = default;
  iterator(BasicDataLoader* loader, const B* current) noexcept : loader_(loader), current_(current) {}

  reference operator*() const { return *current_; }
  const B* operator->() const { return current_; }
  iterator& operator++() {
    current_ = loader_->advance();
    return *this;
  }
  void operator++(int) { ++*this; }
  friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept { return it.current_ == nullptr; }

 private:
  BasicDataLoader* loader_ = nullptr;
  const B* current_ = nullptr;
};

/// The loader of data/target examples, the batches of LibTorch's own
/// datasets (torch::data::Example<>).
using DataLoader = BasicDataLoader<detail::TensorExample>;

}  // namespace accelerate
