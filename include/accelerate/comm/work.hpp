// Work: the handle of an operation in flight (c10d's Work, narrowed).
//
// A collective is posted when the call returns; wait() completes it, runs
// its epilogue (copy back into a non-contiguous tensor, the division of an
// average, …) and rethrows any error the operation stored. Every rank must
// wait on every Work it creates: dropping one is allowed (the destructor
// waits, and swallows errors after logging them) but hides failures.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>

namespace accelerate {

class Work {
 public:
  virtual ~Work() = default;
  /// Non-blocking: true once the operation (and its epilogue) has finished.
  virtual bool is_completed() = 0;
  /// Blocks until completion, within the operation's timeout; rethrows the
  /// stored exception. Calling it again after success returns at once.
  virtual void wait() = 0;
  /// The error the operation ended with, if any (valid after completion).
  [[nodiscard]] virtual std::exception_ptr exception() const = 0;
  /// "all_reduce(sum) float32[1024] on world" — for messages and logs.
  [[nodiscard]] virtual const std::string& description() const = 0;
};

/// A Work that is already complete (with or without an error).
std::unique_ptr<Work> completed_work(std::string description, std::exception_ptr error = nullptr);

namespace detail {
/// For Work destructors: waits for completion and reports, never throws.
void complete_dropped_work(Work& work) noexcept;
}  // namespace detail

}  // namespace accelerate
