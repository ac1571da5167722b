// BatchPipeline: loads a range of batches in order, on the calling thread or
// on worker threads that run a bounded number of batches ahead (LibTorch's
// DataLoader workers and prefetch). Shared by the data loaders; header-only
// because it is a template over the batch type.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "accelerate/data/data_loader_options.hpp"

namespace accelerate {

namespace detail {
inline std::optional<WorkerInfo>& worker_info_slot() noexcept {
  thread_local std::optional<WorkerInfo> info;
  return info;
}

/// Loads the batches first … last-1 in order, on the calling thread
/// (workers == 0) or on worker threads that run at most workers × prefetch
/// batches ahead of the consumer. Batch i is loaded by worker (i - first) %
/// workers, so which worker loads which batch (and hence what its seeded
/// generators draw) does not depend on timing.
template <class Batch>
class BatchPipeline {
 public:
  using Load = std::function<Batch(std::int64_t)>;
  using WorkerStart = std::function<void(int worker)>;

  BatchPipeline(Load load, std::int64_t first, std::int64_t last, int workers, int prefetch, WorkerStart start)
      : load_(std::move(load)),
        next_(first),
        last_(last),
        workers_(workers),
        window_(static_cast<std::int64_t>(workers) * prefetch),
        consumed_(first) {
    for (int w = 0; w < workers_; ++w) {
      threads_.emplace_back([this, w, first, start] { run_worker(w, first + w, start); });
    }
  }
  BatchPipeline(const BatchPipeline&) = delete;
  BatchPipeline& operator=(const BatchPipeline&) = delete;

  ~BatchPipeline() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (auto& thread : threads_) thread.join();
  }

  /// The next batch in order, or std::nullopt at the end. Rethrows an
  /// exception of the dataset, after which the pipeline is exhausted.
  std::optional<Batch> next() {
    if (next_ >= last_) return std::nullopt;
    const std::int64_t index = next_++;
    if (workers_ == 0) {
      try {
        return load_(index);
      } catch (...) {
        next_ = last_;
        throw;
      }
    }
    std::unique_lock lock(mutex_);
    consumed_ = index;  // batches before index are taken: the window moves
    changed_.notify_all();
    changed_.wait(lock, [&] { return ready_.contains(index); });
    auto node = ready_.extract(index);
    lock.unlock();
    if (std::holds_alternative<std::exception_ptr>(node.mapped())) {
      next_ = last_;
      std::rethrow_exception(std::get<std::exception_ptr>(node.mapped()));
    }
    return std::move(std::get<Batch>(node.mapped()));
  }

 private:
  void run_worker(int worker, std::int64_t index, const WorkerStart& start) {
    try {
      if (start) start(worker);
    } catch (...) {
      publish(index, std::current_exception());
      return;
    }
    for (; index < last_; index += workers_) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || index < consumed_ + window_; });
        if (stop_) return;
      }
      try {
        publish(index, load_(index));
      } catch (...) {
        publish(index, std::current_exception());
        return;
      }
    }
  }

  template <class Value>
  void publish(std::int64_t index, Value&& value) {
    {
      const std::lock_guard lock(mutex_);
      ready_.emplace(index, std::forward<Value>(value));
    }
    changed_.notify_all();
  }

  Load load_;
  std::int64_t next_;
  std::int64_t last_;
  int workers_;
  std::int64_t window_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::int64_t consumed_;                                                  // guarded; the index the consumer waits for
  bool stop_ = false;                                                      // guarded
  std::map<std::int64_t, std::variant<Batch, std::exception_ptr>> ready_;  // guarded
  std::vector<std::thread> threads_;                                       // last: joined before the rest goes
};

}  // namespace detail

/// The worker thread running the calling code, or std::nullopt on a thread
/// that is not a data loader worker (including num_workers = 0).
[[nodiscard]] inline std::optional<WorkerInfo> current_worker_info() noexcept { return detail::worker_info_slot(); }

}  // namespace accelerate
