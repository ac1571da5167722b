// Work done on a rank's second core while its first writes. Saving reads
// every byte twice, once for the CRC and once for the copy into the page
// cache (or the network). From memory the checksum added about a quarter to
// the writes' time, so a rank that may run on two cores checksums beside the
// write instead of before it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>

namespace accelerate::checkpoint::detail {

/// The cores this rank may use: those its affinity mask allows, at most the
/// host's online cores divided among its ranks (ranks left unbound share
/// them), at least one.
int cores_of_this_rank(int ranks_on_this_host) noexcept;

class SpareCore {
 public:
  /// A worker thread when `cores` is at least two (and a thread can be
  /// started); otherwise every task runs in the caller's thread, inside run().
  explicit SpareCore(int cores);
  ~SpareCore();
  SpareCore(const SpareCore&) = delete;
  SpareCore& operator=(const SpareCore&) = delete;

  /// A task in flight. Its destructor waits for it, so the bytes it reads
  /// outlive it even when the caller unwinds.
  class Task {
   public:
    Task(Task&& other) noexcept : core_(other.core_) { other.core_ = nullptr; }
    Task(const Task&) = delete;
    Task& operator=(const Task&) = delete;
    Task& operator=(Task&&) = delete;
    ~Task() { wait(); }
    /// Returns once the work has run.
    void wait() noexcept;

   private:
    friend class SpareCore;
    explicit Task(SpareCore* core) : core_(core) {}
    SpareCore* core_;  // null once waited for, or when the work ran inline
  };

  /// Runs `work` (which must not throw) on the spare core, or at once in this
  /// thread when there is none or the work is smaller than worth handing
  /// over (`bytes` under 1 MiB). One task at a time.
  [[nodiscard]] Task run(std::function<void()> work, std::size_t bytes);
  [[nodiscard]] bool threaded() const noexcept { return worker_.joinable(); }

 private:
  void serve();
  void finish() noexcept;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> work_;  // set while a task waits for the worker or runs
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace accelerate::checkpoint::detail
